"""RMQ client and worker: queues and topics of the RMQ Redis module, from redis-py.

    import redis, rmq
    orders = rmq.Topic(redis.Redis(port=6380), "orders", slots=16)
    orders.push("order-1001:paid", delay=900_000, group="order-1001")
    rmq.Worker(orders, handle, concurrency=8).run()
"""

from .durable import Durable, NotDurable
from .message import AlreadySettled, Dead, Message
from .module_missing import ModuleNotLoaded
from .queues import Queue, Topic, route, sum_info
from .schedules import Schedule
from .worker import Worker, WorkerStats

__all__ = ["AlreadySettled", "Dead", "Durable", "Message", "ModuleNotLoaded", "NotDurable",
           "Queue", "Schedule", "Topic", "Worker", "WorkerStats", "route", "sum_info"]
__version__ = "0.1.0"
