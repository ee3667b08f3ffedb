//! What is wrong with a cron expression the parser refused, said in the project's words
//! (which field, which value, what it may be), not the parser library's.

/// Each field's name, its bounds and the words it takes (besides numbers).
struct Field {
    name: &'static str,
    lo: u32,
    hi: u32,
    words: &'static [&'static str],
}

const SECOND: Field = Field { name: "second", lo: 0, hi: 59, words: &[] };
const FIVE: [Field; 5] = [
    Field { name: "minute", lo: 0, hi: 59, words: &[] },
    Field { name: "hour", lo: 0, hi: 23, words: &[] },
    Field { name: "day of month", lo: 1, hi: 31, words: &[] },
    Field { name: "month", lo: 1, hi: 12, words: &["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"] },
    Field { name: "day of week", lo: 0, hi: 7, words: &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"] },
];
const SHORTCUTS: &str = "@yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly";
const FORM: &str = "each field is *, a number, a range a-b, a list a,b or a step */n or a-b/n \
                    (fields: minute hour day-of-month month day-of-week, with an optional leading second)";

/// Why `expr` is no cron expression, for an expression the parser refused.
pub fn diagnose(expr: &str) -> String {
    let trimmed = expr.trim();
    if trimmed.starts_with('@') {
        return format!("cron expression '{expr}': unknown shortcut (known: {SHORTCUTS})");
    }
    let parts: Vec<&str> = trimmed.split_whitespace().collect();
    let fields: Vec<&Field> = match parts.len() {
        5 => FIVE.iter().collect(),
        6 => std::iter::once(&SECOND).chain(FIVE.iter()).collect(),
        _ => return format!("cron expression '{expr}' must have 5 fields, or 6 with leading seconds"),
    };
    for (part, field) in parts.iter().zip(fields) {
        if let Some(why) = field_problem(part, field) {
            return format!("cron expression '{expr}': the {} field '{part}': {why}", field.name);
        }
    }
    format!("cron expression '{expr}' is not valid: {FORM}")
}

fn field_problem(part: &str, f: &Field) -> Option<String> {
    for item in part.split(',') {
        // Day fields also take L, W and # (last, weekday, nth): left to the parser.
        if f.name.starts_with("day") && item.bytes().any(|b| matches!(b.to_ascii_uppercase(), b'L' | b'W' | b'#')) {
            continue;
        }
        let (base, step) = match item.split_once('/') {
            Some((b, s)) => (b, Some(s)),
            None => (item, None),
        };
        if let Some(s) = step {
            match s.parse::<u32>() {
                Ok(0) => return Some("a step of 0 never moves on".into()),
                Ok(_) => {}
                Err(_) => return Some(format!("the step '{s}' is not a positive number")),
            }
        }
        if base.is_empty() {
            return Some("an empty item (two commas, or a comma at an end)".into());
        }
        if base == "*" || base == "?" {
            continue;
        }
        let (a, b) = base.split_once('-').map_or((base, None), |(a, b)| (a, Some(b)));
        let lo = match value(a, f) {
            Ok(n) => n,
            Err(why) => return Some(why),
        };
        if let Some(b) = b {
            match value(b, f) {
                Ok(hi) if hi < lo => return Some(format!("the range {a}-{b} runs backwards")),
                Ok(_) => {}
                Err(why) => return Some(why),
            }
        }
    }
    None
}

/// The number `text` stands for in field `f`, or why it stands for none.
fn value(text: &str, f: &Field) -> Result<u32, String> {
    let range = format!("{}-{}", f.lo, f.hi);
    let takes = if f.words.is_empty() { range } else { format!("{range} or {}-{}", f.words[0], f.words[f.words.len() - 1]) };
    if let Ok(n) = text.parse::<u32>() {
        return if (f.lo..=f.hi).contains(&n) { Ok(n) } else { Err(format!("{n} is out of range ({takes})")) };
    }
    let upper = text.to_ascii_uppercase();
    match f.words.iter().position(|w| *w == upper) {
        Some(i) => Ok(f.lo + i as u32),
        None if text.is_empty() => Err(format!("a range needs a value at each end ({takes})")),
        None => Err(format!("'{text}' is no {} ({takes})", f.name)),
    }
}

#[cfg(test)]
mod tests {
    use super::diagnose;

    #[test]
    fn says_which_field_and_value_and_what_it_may_be() {
        let cases = [
            ("61 * * * *", "cron expression '61 * * * *': the minute field '61': 61 is out of range (0-59)"),
            ("0 25 * * *", "the hour field '25': 25 is out of range (0-23)"),
            ("* * 32 * *", "the day of month field '32': 32 is out of range (1-31)"),
            ("* * * 13 *", "the month field '13': 13 is out of range (1-12 or JAN-DEC)"),
            ("* * * * MON-FRX", "the day of week field 'MON-FRX': 'FRX' is no day of week (0-7 or SUN-SAT)"),
            ("*/0 * * * *", "the minute field '*/0': a step of 0 never moves on"),
            ("*/x * * * *", "the minute field '*/x': the step 'x' is not a positive number"),
            ("1-60 * * * *", "the minute field '1-60': 60 is out of range (0-59)"),
            ("* * * FEB-JAN *", "the month field 'FEB-JAN': the range FEB-JAN runs backwards"),
            ("30-5 * * * *", "the minute field '30-5': the range 30-5 runs backwards"),
            ("5,,6 * * * *", "the minute field '5,,6': an empty item"),
            ("60 * * * * *", "the second field '60': 60 is out of range (0-59)"),
            ("@weird", "unknown shortcut (known: @yearly"),
            ("* * *", "must have 5 fields, or 6 with leading seconds"),
        ];
        for (expr, want) in cases {
            let got = diagnose(expr);
            assert!(got.contains(want), "{expr}: {got}");
            assert!(!got.contains("Component error") && !got.contains("CronPattern"), "{got}");
        }
        assert!(diagnose("* * L * *").contains("is not valid: each field is *"), "left to the parser, then said generally");
    }
}
