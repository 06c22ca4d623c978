//! Plain-text tables for the management commands: a header row, then one line per row, columns
//! padded to their widest cell (counted in characters).

pub fn render(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(width) = widths.get_mut(i) {
                *width = (*width).max(cell.chars().count());
            }
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| -> String {
        let mut out = String::new();
        for (i, cell) in cells.enumerate() {
            if i > 0 {
                out.push_str("  ");
            }
            out.push_str(cell);
            let pad = widths[i].saturating_sub(cell.chars().count());
            out.extend(std::iter::repeat_n(' ', pad));
        }
        out.trim_end().to_owned()
    };
    let mut out = line(&mut headers.iter().copied());
    out.push('\n');
    for row in rows {
        out.push_str(&line(&mut row.iter().map(String::as_str)));
        out.push('\n');
    }
    out
}

/// A list for a cell: comma-separated, `-` when empty.
pub fn list<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let joined: Vec<&str> = items.into_iter().collect();
    if joined.is_empty() {
        "-".to_owned()
    } else {
        joined.join(", ")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn columns_are_padded_to_the_widest_cell() {
        let text = super::render(
            &["ID", "EMAIL"],
            &[
                vec!["1".into(), "ann@x.io".into()],
                vec!["12".into(), "b@x".into()],
            ],
        );
        assert_eq!(text, "ID  EMAIL\n1   ann@x.io\n12  b@x\n");
    }
}
