//! The record families of `nokv-metadata-schema.md` as raw layouts: the one
//! concrete value the document names (`chunk_index = u64::MAX` holds the body
//! summary) and the orders it relies on.

use strata_keys::{Key, Subspace, raw_key, tuple_key};

// Family tags are ours; the document gives the field order only.
/// `inode_current: mount_id | inode_id`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Inode {
    pub mount_id: u64,
    pub inode_id: u64,
}
/// `dentry_current: mount_id | parent_inode | name`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Dentry {
    pub mount_id: u64,
    pub parent_inode: u64,
    pub name: String,
}
/// `chunk_manifest_current: mount_id | inode_id | generation | chunk_index`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Manifest {
    pub mount_id: u64,
    pub inode_id: u64,
    pub generation: u64,
    pub chunk_index: u64,
}
/// `watch_log: mount_id | watch_scope | commit_version | event_id`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Watch {
    pub mount_id: u64,
    pub scope: u64,
    pub commit_version: u64,
    pub event_id: u64,
}
raw_key! {
    Inode -> Vec<u8> = ([1], {mount_id}, {inode_id});
    Dentry -> Vec<u8> = ([2], {mount_id}, {parent_inode}, ..{name});
    Manifest -> Vec<u8> = ([3], {mount_id}, {inode_id}, {generation}, {chunk_index});
    Watch -> Vec<u8> = ([4], {mount_id}, {scope}, {commit_version}, {event_id});
}

/// `chunk_index` of the body summary row.
const BODY: u64 = u64::MAX;

/// `history: family | user_key | inverted_commit_version`. The document
/// length-prefixes the user key; a tuple byte string is self-delimiting
/// and keeps the same grouping, newest version first.
#[derive(Debug, Clone, PartialEq)]
pub struct History {
    pub family: u16,
    pub user_key: Vec<u8>,
    pub inverted: u64,
}
tuple_key! {
    History -> Vec<u8> = (10, {family}, {user_key}, {inverted});
}

#[test]
fn body_summary_row_sorts_after_every_chunk_of_its_generation() {
    let row = |generation, chunk_index| {
        Manifest {
            mount_id: 1,
            inode_id: 9,
            generation,
            chunk_index,
        }
        .pack()
        .unwrap()
    };
    let body = row(4, BODY);
    assert_eq!(&body[body.len() - 8..], [0xFF; 8]);
    assert!(row(4, 0) < row(4, 1_000_000) && row(4, 1_000_000) < body);
    assert!(
        body < row(5, 0),
        "the next generation starts after the summary"
    );
    // A prefix scan of one generation sees the summary despite its 0xFF bytes.
    let generation = Subspace::from_bytes(row(4, 0)[..25].to_vec());
    assert!(generation.range().contains(&body));
    assert_eq!(Manifest::unpack(&body).unwrap().chunk_index, BODY);
}

#[test]
fn readdir_is_one_prefix_scan_in_name_order() {
    let entry = |parent, name: &str| {
        Dentry {
            mount_id: 1,
            parent_inode: parent,
            name: name.into(),
        }
        .pack()
        .unwrap()
    };
    let dir = Subspace::from_bytes(entry(7, "")).range();
    let mut keys = [
        entry(7, "b"),
        entry(8, "a"),
        entry(7, "a"),
        entry(6, "z"),
        entry(7, "a.txt"),
    ];
    keys.sort();
    let listed: Vec<String> = keys
        .iter()
        .filter(|k| dir.contains(k))
        .map(|k| Dentry::unpack(k).unwrap().name)
        .collect();
    assert_eq!(listed, ["a", "a.txt", "b"]);
    assert_eq!(
        entry(7, "a"),
        [
            [2].as_slice(),
            &1u64.to_be_bytes(),
            &7u64.to_be_bytes(),
            b"a"
        ]
        .concat()
    );
    let _ = Inode {
        mount_id: 1,
        inode_id: 7,
    }
    .pack()
    .unwrap();
}

#[test]
fn history_reads_newest_first_and_watch_log_in_commit_order() {
    let h = |version: u64| {
        History {
            family: 2,
            user_key: b"k".to_vec(),
            inverted: u64::MAX - version,
        }
        .pack()
        .unwrap()
    };
    assert!(h(9) < h(3), "a larger commit version sorts first");
    let w = |v| {
        Watch {
            mount_id: 1,
            scope: 3,
            commit_version: v,
            event_id: 0,
        }
        .pack()
        .unwrap()
    };
    assert!(w(3) < w(9));
}
