//! Parsing of command-line values that clap does not know.

/// An element count: `16777216`, `2^24`, `2^24+3`, `2^20-1` or `1<<24`.
pub fn parse_count(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let err = || format!("`{s}` is not a count (examples: 1000, 2^24, 2^24+3, 1<<20)");
    let (base, offset) = match s.rfind(['+', '-']) {
        Some(i) if i > 0 => (
            &s[..i],
            Some((
                &s[i..i + 1],
                s[i + 1..].trim().parse::<usize>().map_err(|_| err())?,
            )),
        ),
        _ => (s, None),
    };
    let base = base.trim();
    let value = if let Some(exp) = base.strip_prefix("2^").or_else(|| base.strip_prefix("1<<")) {
        let e: u32 = exp.trim().parse().map_err(|_| err())?;
        1usize
            .checked_shl(e)
            .filter(|_| e < usize::BITS)
            .ok_or_else(err)?
    } else {
        base.parse().map_err(|_| err())?
    };
    match offset {
        Some(("+", o)) => value.checked_add(o).ok_or_else(err),
        Some((_, o)) => value.checked_sub(o).ok_or_else(err),
        None => Ok(value),
    }
}
