//! [`Texts`]: a column of text cells packed in one buffer, the form in which a computed field's
//! text dependencies arrive and its text values are best given back (`canopy:plugin@0.3.0`'s
//! `packed.texts`).
//!
//! Why a buffer and not a `Vec<Option<String>>`: every string that crosses the boundary on its
//! own costs the host a call into this instance's allocator and the plugin an allocation, then a
//! free. A packed column crosses as one string and two lists whatever its length, and a handler
//! reads its cells as `&str` slices of it and writes its answer into one growing buffer.

use std::fmt;

use crate::bindings::canopy::plugin::packed;

/// Text cells, one per row, packed: all the cells' UTF-8 in one buffer and the offset where each
/// ends. Read with [`Texts::get`] or [`Texts::iter`]; build an answer with [`Texts::push`],
/// [`Texts::push_null`] and [`Texts::push_with`] (which writes a cell in place, without a
/// `String` per row), or collect one from an iterator of `Option<&str>`/`Option<String>`.
///
/// ```ignore
/// let (first, last) = (rows.text("first_name")?, rows.text("last_name")?);
/// let mut names = Texts::with_capacity(rows.len(), 16 * rows.len());
/// for (f, l) in first.iter().zip(last.iter()) {
///     names.push_with(|cell| {
///         cell.push_str(f.unwrap_or(""));
///         cell.push_str(" ");
///         cell.push_str(l.unwrap_or(""));
///     });
/// }
/// Ok(names.into())
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Texts {
    text: String,
    /// Where each cell ends in `text`, in bytes.
    ends: Vec<u32>,
    /// The rows whose cell is null, ascending.
    nulls: Vec<u32>,
}

impl Texts {
    /// No cells.
    pub fn new() -> Self {
        Self::default()
    }

    /// No cells, with room for `rows` cells of `bytes` bytes in all.
    pub fn with_capacity(rows: usize, bytes: usize) -> Self {
        Self {
            text: String::with_capacity(bytes),
            ends: Vec::with_capacity(rows),
            nulls: Vec::new(),
        }
    }

    /// The number of cells.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there is no cell.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Whether the cell at `row` is null (or absent).
    pub fn is_null(&self, row: usize) -> bool {
        row >= self.ends.len()
            || (!self.nulls.is_empty()
                && u32::try_from(row).is_ok_and(|r| self.nulls.binary_search(&r).is_ok()))
    }

    /// The cell at `row`: `None` when it is null or absent.
    pub fn get(&self, row: usize) -> Option<&str> {
        if self.is_null(row) {
            return None;
        }
        self.slice(row)
    }

    /// The cells in order, `None` for nulls.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Option<&str>> + '_ {
        let mut nulls = self.nulls.iter().peekable();
        (0..self.ends.len()).map(move |row| {
            // `nulls` is ascending: one pass over it for the whole column.
            if nulls.next_if(|&&n| n as usize == row).is_some() {
                None
            } else {
                self.slice(row)
            }
        })
    }

    /// Appends a cell (`None`: a null cell).
    pub fn push(&mut self, cell: Option<&str>) {
        match cell {
            Some(s) => self.push_with(|c| c.push_str(s)),
            None => self.push_null(),
        }
    }

    /// Appends a null cell.
    pub fn push_null(&mut self) {
        self.nulls.push(self.next_row());
        self.ends.push(self.end());
    }

    /// Appends a cell written in place by `write`, into the column's own buffer. The [`Cell`]
    /// also takes `write!`: `texts.push_with(|c| { let _ = write!(c, "#{id}"); })`.
    pub fn push_with(&mut self, write: impl FnOnce(&mut Cell<'_>)) {
        write(&mut Cell {
            text: &mut self.text,
        });
        self.ends.push(self.end());
    }

    /// The cells as owned strings (what [`crate::Rows::strings`] hands out for a packed column).
    pub fn to_strings(&self) -> Vec<Option<String>> {
        self.iter().map(|c| c.map(str::to_owned)).collect()
    }

    fn slice(&self, row: usize) -> Option<&str> {
        let end = *self.ends.get(row)? as usize;
        let start = row
            .checked_sub(1)
            .and_then(|r| self.ends.get(r))
            .map_or(0, |&s| s as usize);
        // `get`: an offset the host got wrong reads as null rather than panicking.
        self.text.get(start..end)
    }

    fn end(&self) -> u32 {
        // A linear memory holds at most 4 GiB: the buffer's length fits.
        u32::try_from(self.text.len()).unwrap_or(u32::MAX)
    }

    fn next_row(&self) -> u32 {
        u32::try_from(self.ends.len()).unwrap_or(u32::MAX)
    }
}

impl fmt::Debug for Texts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<S: AsRef<str>> FromIterator<Option<S>> for Texts {
    fn from_iter<I: IntoIterator<Item = Option<S>>>(cells: I) -> Self {
        let cells = cells.into_iter();
        let mut texts = Self::with_capacity(cells.size_hint().0, 0);
        for cell in cells {
            texts.push(cell.as_ref().map(AsRef::as_ref));
        }
        texts
    }
}

impl From<packed::Texts> for Texts {
    fn from(t: packed::Texts) -> Self {
        Self {
            text: t.text,
            ends: t.ends,
            nulls: t.nulls,
        }
    }
}

impl From<Texts> for packed::Texts {
    fn from(t: Texts) -> Self {
        Self {
            text: t.text,
            ends: t.ends,
            nulls: t.nulls,
        }
    }
}

/// The cell being written by [`Texts::push_with`]: text can only be appended to it.
pub struct Cell<'a> {
    text: &'a mut String,
}

impl Cell<'_> {
    /// Appends `s` to the cell.
    pub fn push_str(&mut self, s: &str) {
        self.text.push_str(s);
    }

    /// Appends one character to the cell.
    pub fn push(&mut self, c: char) {
        self.text.push(c);
    }
}

impl fmt::Write for Cell<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.text.push_str(s);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::fmt::Write;

    use super::*;

    #[test]
    fn cells_read_back_as_pushed_with_nulls_and_empty_strings_apart() {
        let mut t = Texts::new();
        t.push(Some("Ann"));
        t.push_null();
        t.push(Some(""));
        t.push_with(|c| {
            c.push_str("Bo");
            c.push('é');
            let _ = write!(c, "#{}", 7);
        });
        t.push_null();
        assert_eq!(t.len(), 5);
        assert_eq!(
            t.iter().collect::<Vec<_>>(),
            [Some("Ann"), None, Some(""), Some("Boé#7"), None]
        );
        assert_eq!(
            (0..6).map(|r| t.get(r)).collect::<Vec<_>>(),
            [Some("Ann"), None, Some(""), Some("Boé#7"), None, None]
        );
        let wire = packed::Texts::from(t.clone());
        assert_eq!(wire.text, "AnnBoé#7");
        assert_eq!(wire.ends, [3, 3, 3, 9, 9]);
        assert_eq!(wire.nulls, [1, 4]);
        assert_eq!(Texts::from(wire), t);
    }

    #[test]
    fn offsets_that_split_a_character_or_overrun_read_as_null_without_panicking() {
        let t = Texts::from(packed::Texts {
            text: "é".to_owned(),
            ends: vec![1, 2, 9],
            nulls: vec![],
        });
        assert_eq!(t.iter().collect::<Vec<_>>(), [None, None, None]);
    }

    #[test]
    fn collecting_owned_or_borrowed_cells_gives_the_same_column() {
        let owned: Texts = vec![Some("a".to_owned()), None].into_iter().collect();
        let borrowed: Texts = [Some("a"), None].into_iter().collect();
        assert_eq!(owned, borrowed);
        assert_eq!(owned.to_strings(), [Some("a".to_owned()), None]);
    }
}
