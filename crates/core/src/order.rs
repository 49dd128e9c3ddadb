//! Sorting many byte strings that share a long prefix: a scan's skill names and folder paths.

/// The positions `0..keys.len()` in the order of `(group, key)`, and among equal ones by position:
/// the order a sort of `(group, key, position)` gives. Each comparison is settled by the 16 bytes
/// of the keys after the prefix all of them share, read as one integer, and reads the keys
/// themselves only when those are equal. A scan's names and paths share long prefixes (`skill-`,
/// the root's path), which a plain sort would compare again in every comparison, each through a
/// call to `memcmp`, in keys scattered over the heap.
pub(crate) fn positions_in_order(keys: &[(usize, &[u8])]) -> Vec<usize> {
    let common = keys.first().map_or(0, |&(_, first)| {
        (keys.iter()).fold(first.len(), |common, &(_, key)| shared_prefix(&first[..common], key))
    });
    let mut keyed: Vec<(usize, u128, &[u8], usize)> = (keys.iter().enumerate())
        .map(|(position, &(group, key))| (group, head(&key[common..]), key, position))
        .collect();
    keyed.sort_unstable();
    keyed.into_iter().map(|(.., position)| position).collect()
}

/// The first 16 bytes of `bytes` as one big-endian integer, padded with zeros: in the order of
/// the bytes themselves, up to ties (zero is the smallest byte, so a string before its own
/// extensions stays before them).
fn head(bytes: &[u8]) -> u128 {
    let mut head = [0; 16];
    let length = bytes.len().min(16);
    head[..length].copy_from_slice(&bytes[..length]);
    u128::from_be_bytes(head)
}

fn shared_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(a, b)| a == b).count()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// The order of a plain sort, whatever the keys: sharing prefixes or not, some the
        /// prefixes of others, with zero bytes, empty, repeated, in several groups.
        #[test]
        fn the_order_of_a_plain_sort(
            prefix in proptest::collection::vec(prop_oneof![Just(0u8), Just(b'/'), any::<u8>()], 0..24),
            tails in proptest::collection::vec(
                (0..3usize, proptest::collection::vec(prop_oneof![Just(0u8), Just(b'a'), Just(b'b'), any::<u8>()], 0..40)),
                0..60,
            ),
        ) {
            let owned: Vec<(usize, Vec<u8>)> =
                tails.into_iter().map(|(group, tail)| (group, [prefix.as_slice(), &tail].concat())).collect();
            let keys: Vec<(usize, &[u8])> = owned.iter().map(|(group, key)| (*group, key.as_slice())).collect();
            let mut expected: Vec<(usize, &[u8], usize)> =
                keys.iter().enumerate().map(|(position, &(group, key))| (group, key, position)).collect();
            expected.sort();
            let expected: Vec<usize> = expected.into_iter().map(|(.., position)| position).collect();
            prop_assert_eq!(positions_in_order(&keys), expected);
        }
    }

    #[test]
    fn long_shared_prefixes_and_keys_that_end_early() {
        let keys: Vec<(usize, &[u8])> = vec![
            (0, b"/srv/skills/team-10/skill-00001/".as_slice()),
            (0, b"/srv/skills/team-100/skill-10000/"),
            (0, b"/srv/skills/team-10/"),
            (0, b"/srv/skills/team-10/skill-00001/A/"),
            (0, b"/srv/skills/team-1"),
            (1, b"/a"),
        ];
        assert_eq!(positions_in_order(&keys), [4, 2, 0, 3, 1, 5]);
        assert_eq!(positions_in_order(&[]), Vec::<usize>::new());
    }
}
