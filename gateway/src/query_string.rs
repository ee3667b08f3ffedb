//! A URL's query string read as SigV4 and the presigners write it: `name=value` fields
//! joined by `&`, percent-encoded (`+` a space).

/// The query's fields, decoded.
pub fn query_pairs(query: &str) -> impl Iterator<Item = (String, String)> + '_ {
    query.split('&').filter(|kv| !kv.is_empty()).map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (percent_decode(k), percent_decode(v))
    })
}

pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (b[i], b.get(i + 1).copied().and_then(hex), b.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b'+', _, _) => {
                out.push(b' ');
                i += 1;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_decoded() {
        let pairs: Vec<_> = query_pairs("a=1%2F2&&b&c=x+y%zz&%41=%E2%82%AC").collect();
        let want = [("a", "1/2"), ("b", ""), ("c", "x y%zz"), ("A", "\u{20ac}")];
        assert_eq!(pairs, want.map(|(k, v)| (k.to_string(), v.to_string())));
    }
}
