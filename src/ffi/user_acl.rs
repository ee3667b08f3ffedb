//! The ACL of the user running a command, for keyless commands that check key permissions
//! themselves (Redis checks only declared keys).

use redis_module::raw;

use super::{Ctx, RStr, OK};

/// The current user, freed on drop.
pub struct User(*mut raw::RedisModuleUser);

impl User {
    /// The name of the user running the command (None outside a client's command, or where
    /// the server lacks the API).
    pub fn current_name(ctx: Ctx) -> Option<RStr> {
        // SAFETY: optional API pointers read; a valid command context; the name is a new
        // string we own.
        unsafe {
            let (Some(name_of), Some(_)) = (raw::RedisModule_GetCurrentUserName, raw::RedisModule_GetModuleUserFromUserName) else {
                return None;
            };
            let name = name_of(ctx.ptr());
            (!name.is_null()).then(|| RStr::adopt(name))
        }
    }

    /// The user of that name, with its rules as they are now (a copy: costly, so callers
    /// keep verdicts rather than users).
    pub fn named(name: &RStr) -> Option<User> {
        // SAFETY: optional API pointer read; a live name; the lookup copies what it needs.
        let user = unsafe { raw::RedisModule_GetModuleUserFromUserName?(name.ptr()) };
        (!user.is_null()).then_some(User(user))
    }

    /// Whether the user may read and write `key`.
    pub fn may_read_write(&self, key: &RStr) -> bool {
        self.may(key, raw::REDISMODULE_CMD_KEY_ACCESS | raw::REDISMODULE_CMD_KEY_UPDATE)
    }

    /// Whether the user may read `key`.
    pub fn may_read(&self, key: &RStr) -> bool {
        self.may(key, raw::REDISMODULE_CMD_KEY_ACCESS)
    }

    fn may(&self, key: &RStr, flags: u32) -> bool {
        // SAFETY: a live user and key name.
        match unsafe { raw::RedisModule_ACLCheckKeyPermissions } {
            Some(check) => unsafe { check(self.0, key.ptr(), flags as i32) == OK },
            None => true,
        }
    }
}

impl Drop for User {
    fn drop(&mut self) {
        // SAFETY: obtained from GetModuleUserFromUserName, freed once.
        if let Some(free) = unsafe { raw::RedisModule_FreeModuleUser } {
            unsafe { free(self.0) };
        }
    }
}
