/** rmq-redis: the Node.js client and worker of RMQ, the message queue inside Redis. */

export { Queue, Topic, route } from "./queues";
export type {
  Info, Mode, Policy, PopOptions, PushOptions, ScheduleEntry, ScheduleOptions, TopicPopOptions,
  TopicPushOptions,
} from "./queues";
export { AlreadySettled, Dead, Message } from "./message";
export type { NackOptions } from "./message";
export { Worker } from "./worker";
export type { Handler, WorkerOptions, WorkerStats } from "./worker";
export type { Client, Data } from "./util";
