//! Pagination: skip and limit.

/// A page of results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    pub skip: u64,
    pub limit: u64,
}

impl Page {
    pub fn new(skip: u64, limit: u64) -> Self {
        Self { skip, limit }
    }

    /// From the agent's 1-based page number and page size.
    pub fn from_number(number: u64, size: u64) -> Self {
        Self {
            skip: number.saturating_sub(1) * size,
            limit: size,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_numbers_are_one_based() {
        assert_eq!(Page::from_number(1, 15), Page::new(0, 15));
        assert_eq!(Page::from_number(3, 20), Page::new(40, 20));
    }
}
