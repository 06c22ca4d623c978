//! Byte sizes as the agent's body parser reads them: a byte count, or a size string such as
//! `50mb`.

/// Parses `1048576`, `1kb`, `50mb`, `1.5 GB`: units are `b`, `kb`, `mb`, `gb`, `tb`, `pb`, powers
/// of 1024 and case-insensitive, as in the `bytes` package that the agent's body parser uses.
/// Returns `None` for anything else, including a negative or fractional byte count.
pub fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1 << 10,
        "mb" => 1 << 20,
        "gb" => 1 << 30,
        "tb" => 1 << 40,
        "pb" => 1 << 50,
        _ => return None,
    };
    if let Ok(whole) = number.parse::<u64>() {
        return whole.checked_mul(multiplier);
    }
    // A fraction only makes sense with a unit; `bytes` floors the product to whole bytes.
    let fraction: f64 = number.parse().ok()?;
    if multiplier == 1 || !fraction.is_finite() {
        return None;
    }
    let bytes = (fraction * multiplier as f64).floor();
    (bytes >= 0.0 && bytes < u64::MAX as f64).then_some(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn byte_counts_and_size_strings_are_bytes() {
        assert_eq!(parse_size("1048576"), Some(1_048_576));
        assert_eq!(parse_size("1kb"), Some(1024));
        assert_eq!(parse_size("50mb"), Some(50 * 1024 * 1024));
        assert_eq!(parse_size("50MB"), Some(50 * 1024 * 1024));
        assert_eq!(parse_size(" 2 gb "), Some(2 << 30));
        assert_eq!(parse_size("1.5kb"), Some(1536));
        assert_eq!(parse_size("10b"), Some(10));
    }

    #[test]
    fn malformed_sizes_are_refused() {
        for text in [
            "",
            "mb",
            "50 megabytes",
            "-1",
            "1.5",
            "1..5mb",
            "99999999999pb",
            "0x10",
        ] {
            assert_eq!(parse_size(text), None, "{text}");
        }
    }
}
