//! A commit's trees and blobs, read from the mirror's object store for core's tree walk
//! ([`skillcat_core::walk_tree`]) and file listings.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use gix::ObjectId;
use gix::objs::tree::EntryKind;
use skillcat_core::{Digest, TreeEntry, TreeEntryKind, TreeError, TreeStore};

/// The object store of one mirror, opened for one scan or read, with the digests of blobs met
/// before (a blob's digest never changes, so each is hashed once per process).
pub struct ObjectStore<'a> {
    pub repo: &'a gix::Repository,
    pub digests: &'a Mutex<HashMap<ObjectId, Digest>>,
}

fn failed(id: &ObjectId, error: impl std::fmt::Display) -> TreeError {
    TreeError(format!("cannot read the object {id} from the mirror: {error}"))
}

impl TreeStore for ObjectStore<'_> {
    type Id = ObjectId;

    fn folder(&self, id: &ObjectId) -> Result<Vec<TreeEntry<ObjectId>>, TreeError> {
        if *id == ObjectId::empty_tree(id.kind()) {
            return Ok(Vec::new());
        }
        let object = self.repo.find_object(*id).map_err(|error| failed(id, error))?;
        let tree = object.try_into_tree().map_err(|error| failed(id, error))?;
        let decoded = tree.decode().map_err(|error| failed(id, error))?;
        Ok(decoded
            .entries
            .iter()
            .map(|entry| TreeEntry {
                name: entry.filename.to_vec(),
                kind: match entry.mode.kind() {
                    EntryKind::Tree => TreeEntryKind::Folder,
                    EntryKind::Blob => TreeEntryKind::File { executable: false },
                    EntryKind::BlobExecutable => TreeEntryKind::File { executable: true },
                    EntryKind::Link => TreeEntryKind::Symlink,
                    EntryKind::Commit => TreeEntryKind::Submodule,
                },
                id: entry.oid.to_owned(),
            })
            .collect())
    }

    fn size(&self, id: &ObjectId) -> Result<u64, TreeError> {
        let header = self.repo.find_header(*id).map_err(|error| failed(id, error))?;
        if header.kind() != gix::object::Kind::Blob {
            return Err(failed(id, format!("a {} where a blob belongs", header.kind())));
        }
        Ok(header.size())
    }

    fn read(&self, id: &ObjectId) -> Result<Vec<u8>, TreeError> {
        let object = self.repo.find_object(*id).map_err(|error| failed(id, error))?;
        if object.kind != gix::object::Kind::Blob {
            return Err(failed(id, format!("a {} where a blob belongs", object.kind)));
        }
        Ok(object.detach().data)
    }

    fn digest(&self, id: &ObjectId) -> Result<Digest, TreeError> {
        if let Some(digest) = self.digests.lock().unwrap_or_else(PoisonError::into_inner).get(id) {
            return Ok(*digest);
        }
        let digest = Digest::of(&self.read(id)?);
        self.digests.lock().unwrap_or_else(PoisonError::into_inner).insert(*id, digest);
        Ok(digest)
    }
}
