//! The ACL of the user running a command, for keyless commands that check key permissions
//! themselves (Redis checks only declared keys).

use redis_module::raw;

use super::{Ctx, RStr, OK};

/// The current user, freed on drop.
pub struct User(*mut raw::RedisModuleUser);

impl User {
    /// The user running the command (None outside a client's command, or where the server
    /// lacks the API).
    pub fn current(ctx: Ctx) -> Option<(RStr, User)> {
        // SAFETY: optional API pointers read; a valid command context; the name is a new
        // string we own; the user lookup copies what it needs.
        unsafe {
            let (Some(name_of), Some(user_of)) = (raw::RedisModule_GetCurrentUserName, raw::RedisModule_GetModuleUserFromUserName) else {
                return None;
            };
            let name = name_of(ctx.ptr());
            if name.is_null() {
                return None;
            }
            let name = RStr::adopt(name);
            let user = user_of(name.ptr());
            (!user.is_null()).then_some((name, User(user)))
        }
    }

    /// Whether the user may read and write `key`.
    pub fn may_read_write(&self, key: &RStr) -> bool {
        let flags = (raw::REDISMODULE_CMD_KEY_ACCESS | raw::REDISMODULE_CMD_KEY_UPDATE) as i32;
        // SAFETY: a live user and key name.
        match unsafe { raw::RedisModule_ACLCheckKeyPermissions } {
            Some(check) => unsafe { check(self.0, key.ptr(), flags) == OK },
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
