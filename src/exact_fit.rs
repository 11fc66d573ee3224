//! Lists kept long after they are filled, in allocations of their own size.
//!
//! `Vec::shrink_to_fit` asks the allocator to shrink the block in place, which an allocator
//! may decline for a small change (mimalloc left a block that would shrink by less than half
//! as it was): a list filled by pushes could keep up to half its room empty for as long as it
//! is kept. Moving the items into an allocation of their number gives that room back whatever
//! the allocator.

/// Moves `v`'s items into an allocation of their number, when it has room to spare.
pub fn fit<T>(v: &mut Vec<T>) {
    if v.capacity() > v.len() {
        let mut exact = Vec::with_capacity(v.len());
        exact.append(v);
        *v = exact;
    }
}

#[cfg(test)]
mod tests {
    use super::fit;

    #[test]
    fn a_list_with_room_to_spare_moves_to_an_allocation_of_its_size() {
        let mut v: Vec<String> = Vec::with_capacity(100);
        v.extend(["a", "b", "c"].map(String::from));
        let first = v.as_ptr();
        fit(&mut v);
        assert_eq!(v, ["a", "b", "c"]);
        assert_eq!(v.capacity(), 3);
        assert_ne!(
            v.as_ptr(),
            first,
            "a new allocation, not the old one shrunk"
        );
    }

    #[test]
    fn a_full_list_stays_where_it_is_and_an_empty_one_lets_go_of_its_room() {
        let mut full = vec![1, 2, 3];
        let at = full.as_ptr();
        fit(&mut full);
        assert_eq!(full.as_ptr(), at);
        let mut empty: Vec<u8> = Vec::with_capacity(64);
        fit(&mut empty);
        assert_eq!(empty.capacity(), 0);
    }
}
