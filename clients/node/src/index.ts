/** rmq-redis: the Node.js client and worker of RMQ, the message queue inside Redis. */

export { Queue, Topic, route } from "./queues";
export type {
  Info, Mode, Policy, PopOptions, PushOptions, ScheduleEntry, ScheduleOptions, TargetOptions,
  TopicPopOptions, TopicPushOptions,
} from "./queues";
export { NotDurable } from "./durable";
export type { DurableOption, DurableOptions } from "./durable";
export { AlreadySettled, Dead, Message } from "./message";
export type { NackOptions } from "./message";
export { ModuleNotLoaded } from "./module_missing";
export { Worker } from "./worker";
export type { Handler, WorkerOptions, WorkerStats } from "./worker";
export type { Client, Data } from "./util";
