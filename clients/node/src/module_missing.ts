// The error a Redis without the RMQ module gives, made to say so and how to load it.

import { ReplyError } from "ioredis";

export const HOW_TO_LOAD = "start the server with `redis-server --loadmodule /path/to/librmq.so`, "
  + "or add `loadmodule /path/to/librmq.so` to its redis.conf (`cargo build --release` builds "
  + "target/release/librmq.so)";

/** The server does not know an RMQ.* command: the RMQ module is not loaded there (or is a
 * build without that command). The server's own words end the message. A ReplyError, as
 * the server's error was. */
export class ModuleNotLoaded extends ReplyError {
  constructor(readonly command: string, serverSaid: string) {
    super(`${command}: the RMQ module is not loaded on this Redis server (or its build lacks `
      + `${command}): ${HOW_TO_LOAD}. The server said: ${serverSaid}`);
  }
}

/** `e` as a ModuleNotLoaded when it is the server not knowing an RMQ.* command, else `e`. */
export function moduleMissing(e: unknown): unknown {
  if (!(e instanceof ReplyError) || e instanceof ModuleNotLoaded) return e;
  const said = (e as Error).message;
  const m = /unknown command '(RMQ\.[^']*)'/i.exec(said);
  return m ? new ModuleNotLoaded(m[1], said) : e;
}
