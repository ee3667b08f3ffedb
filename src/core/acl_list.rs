//! Reading ACL LIST's description of a user, for RMQ.TPOP's key permissions.

/// Whether a user, as an ACL LIST line describes it (`user <name> <rules>…`; rules hold
/// no spaces), may read and write every key: its root rules grant all keys (`~*`, as Redis
/// describes `allkeys` and `%RW~*`). Selectors (the parts in parentheses, after the root
/// rules) are not looked at: a user whose every key comes from one is judged key by key.
pub fn all_keys(line: &[u8]) -> bool {
    let mut rules = line.split(|&c| c == b' ').filter(|t| !t.is_empty());
    // The name may look like a rule (a user named `~*`).
    if rules.next() != Some(b"user") || rules.next().is_none() {
        return false;
    }
    let mut all = false;
    for rule in rules.take_while(|r| r.first() != Some(&b'(')) {
        match rule {
            b"~*" | b"%RW~*" | b"%WR~*" | b"allkeys" => all = true,
            b"resetkeys" => all = false,
            _ => {}
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::all_keys;

    #[test]
    fn all_keys_only_from_the_root_rules() {
        assert!(all_keys(b"user default on nopass ~* &* +@all"));
        assert!(all_keys(b"user a on #2d71 ~* resetchannels +@all"));
        assert!(!all_keys(b"user b on #2d71 %R~* resetchannels +@all"), "read only");
        assert!(!all_keys(b"user c on #2d71 ~t_* resetchannels +@all (~* resetchannels -@all +get)"), "in a selector only");
        assert!(!all_keys(b"user ~* on nopass resetchannels +@all"), "the name is no rule");
        assert!(!all_keys(b"user w on nopass ~* resetkeys ~t_*"));
        assert!(!all_keys(b"user w"));
        assert!(!all_keys(b""));
        assert!(!all_keys(b"ERR unknown"));
    }
}
