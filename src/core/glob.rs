//! Glob patterns as Redis matches them (KEYS, SCAN MATCH): `*` any bytes, `?` one byte,
//! `[abc]`, `[^a-z]` classes, `\x` the byte x; binary-safe. Matching keeps only the last
//! `*` to go back to, so it takes O(pattern × name) whatever the pattern (Redis's
//! recursive matcher can take exponential time on many stars).

/// Whether one pattern element at `p` (not `*`) matches byte `c`: the index after the
/// element if it does.
fn element(pat: &[u8], p: usize, c: u8) -> Option<usize> {
    match pat[p] {
        b'?' => Some(p + 1),
        b'\\' if p + 1 < pat.len() => (pat[p + 1] == c).then_some(p + 2),
        b'[' => {
            let mut i = p + 1;
            let negate = pat.get(i) == Some(&b'^');
            if negate {
                i += 1;
            }
            let mut hit = false;
            // An unterminated class runs to the end of the pattern, as in Redis.
            while i < pat.len() && pat[i] != b']' {
                if pat[i] == b'\\' && i + 1 < pat.len() {
                    hit |= pat[i + 1] == c;
                    i += 2;
                } else if i + 2 < pat.len() && pat[i + 1] == b'-' {
                    let (lo, hi) = (pat[i].min(pat[i + 2]), pat[i].max(pat[i + 2]));
                    hit |= (lo..=hi).contains(&c);
                    i += 3;
                } else {
                    hit |= pat[i] == c;
                    i += 1;
                }
            }
            (hit != negate).then_some((i + 1).min(pat.len()))
        }
        b => (b == c).then_some(p + 1),
    }
}

/// Whether `name` matches `pat`.
pub fn matches(pat: &[u8], name: &[u8]) -> bool {
    let (mut p, mut i) = (0, 0);
    // Where the last `*` was, and how much of the name it has taken.
    let mut star: Option<(usize, usize)> = None;
    while i < name.len() {
        if p < pat.len() {
            if pat[p] == b'*' {
                star = Some((p, i));
                p += 1;
                continue;
            }
            if let Some(next) = element(pat, p, name[i]) {
                p = next;
                i += 1;
                continue;
            }
        }
        // A mismatch: the last star takes one byte more, else no match.
        let Some((sp, si)) = star else { return false };
        star = Some((sp, si + 1));
        p = sp + 1;
        i = si + 1;
    }
    pat[p..].iter().all(|&c| c == b'*')
}

/// The bytes every name matching `pat` starts with (up to its first special byte).
pub fn literal_prefix(pat: &[u8]) -> &[u8] {
    let end = pat.iter().position(|c| matches!(c, b'*' | b'?' | b'[' | b'\\')).unwrap_or(pat.len());
    &pat[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_glob_rules() {
        let yes: &[(&[u8], &[u8])] = &[
            (b"*", b""),
            (b"*", b"anything"),
            (b"orders_*", b"orders_12"),
            (b"h?llo", b"hello"),
            (b"h[ae]llo", b"hallo"),
            (b"h[^e]llo", b"hallo"),
            (b"h[a-b]llo", b"hbllo"),
            (b"h[b-a]llo", b"hallo"),
            (b"a\\*b", b"a*b"),
            (b"a[\\]]b", b"a]b"),
            (b"*a*b*c*", b"xxaxxbxxcxx"),
            (b"a\0*", b"a\0\xff"),
            (b"[abc", b"b"),
            (b"x\\", b"x\\"),
        ];
        for (p, n) in yes {
            assert!(matches(p, n), "{p:?} ~ {n:?}");
        }
        let no: &[(&[u8], &[u8])] = &[
            (b"orders_*", b"order_1"),
            (b"h?llo", b"hllo"),
            (b"h[^e]llo", b"hello"),
            (b"h[a-b]llo", b"hcllo"),
            (b"a\\*b", b"axb"),
            (b"abc", b"abcd"),
            (b"*a*b*c*", b"xxaxxcxxbxx"),
            (b"", b"x"),
        ];
        for (p, n) in no {
            assert!(!matches(p, n), "{p:?} !~ {n:?}");
        }
    }

    #[test]
    fn many_stars_take_no_exponential_time() {
        let pat = [b'*'; 40].iter().chain(b"b").copied().collect::<Vec<_>>();
        assert!(!matches(&pat, &[b'a'; 10_000]));
    }

    #[test]
    fn literal_prefixes() {
        assert_eq!(literal_prefix(b"orders_*"), b"orders_");
        assert_eq!(literal_prefix(b"a\\*"), b"a");
        assert_eq!(literal_prefix(b"plain"), b"plain");
        assert_eq!(literal_prefix(b"[ab]"), b"");
    }
}
