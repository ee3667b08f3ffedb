/* The floor of issue 31 item 7 (bench/bench_host.py): a module that subscribes to the
 * keyspace event classes RMQ follows (generic, sorted set, expired, evicted) and registers
 * a command filter as RMQ does (NOSELF), doing nothing with either: a server loading it
 * pays only Redis's own dispatch of those events and of every command to a module. With
 * the argument "v3" it subscribes to the classes RMQ v3 followed (those and hash writes
 * and key creations), to show what that set costs before any callback work. */
#include <string.h>

#include "redismodule.h"

static void on_command(RedisModuleCommandFilterCtx *fctx) {
    (void)fctx;
}

static int on_event(RedisModuleCtx *ctx, int type, const char *event, RedisModuleString *key) {
    (void)ctx;
    (void)type;
    (void)event;
    (void)key;
    return REDISMODULE_OK;
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (RedisModule_Init(ctx, "floor", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR) return REDISMODULE_ERR;
    int mask = REDISMODULE_NOTIFY_GENERIC | REDISMODULE_NOTIFY_ZSET | REDISMODULE_NOTIFY_EXPIRED |
               REDISMODULE_NOTIFY_EVICTED;
    size_t len;
    if (argc == 1 && strcmp(RedisModule_StringPtrLen(argv[0], &len), "v3") == 0)
        mask |= REDISMODULE_NOTIFY_HASH | REDISMODULE_NOTIFY_NEW;
    if (RedisModule_RegisterCommandFilter(ctx, on_command, REDISMODULE_CMDFILTER_NOSELF) == NULL)
        return REDISMODULE_ERR;
    return RedisModule_SubscribeToKeyspaceEvents(ctx, mask, on_event);
}
