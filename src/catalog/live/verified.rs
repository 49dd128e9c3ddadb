//! A listed file read as it is sent: in chunks, each hashed, the last held back until the whole
//! file has read as exactly the listed bytes (its size and digest). A file that reads otherwise
//! ends the stream with an error, so a client sees the answer cut short, never a complete wrong
//! one, and a rescan is asked for. A reader holds at most two chunks, whatever the file's size and
//! however slowly the client takes them.

use std::io::Read as _;
use std::ops::Range;

use bytes::Bytes;
use futures_util::Stream;
use sha2::{Digest as _, Sha256};
use skillcat_core::{Digest, SkillFile, SkillName};

use super::LiveCatalog;
use crate::catalog::CatalogError;
use crate::catalog::snapshot::CatalogSkill;
use crate::sources::Opened;

/// The bytes read from disk at a time.
const CHUNK: usize = 64 * 1024;

/// A listed file of a skill, open for reading.
pub struct VerifiedFile {
    live: LiveCatalog,
    name: SkillName,
    listed: SkillFile,
    content: Content,
}

enum Content {
    /// Held by the source, and checked already.
    Memory(Bytes),
    Disk(std::fs::File),
}

impl LiveCatalog {
    /// `file`, a listed file of `skill` (a skill of a published snapshot), opened beneath the
    /// skill's folder for streaming; refused as changed (and a rescan asked for) when it no
    /// longer has the listed size, or, held in memory, the listed bytes.
    pub async fn open(&self, skill: &CatalogSkill, file: &SkillFile) -> Result<VerifiedFile, CatalogError> {
        let opened = self.source(skill).open_file(&skill.skill, &file.path).await;
        let content = match opened {
            Ok(Opened::Memory(bytes)) if Digest::of(&bytes) == file.digest => Content::Memory(bytes),
            Ok(Opened::File { file: disk, size }) if size == file.size => Content::Disk(disk),
            Ok(_) => return Err(self.changed(skill.skill.name())),
            Err(error) if error.is_stale() => return Err(self.changed(skill.skill.name())),
            Err(source) => return Err(CatalogError::Read { name: skill.skill.name().clone(), source }),
        };
        Ok(VerifiedFile { live: self.clone(), name: skill.skill.name().clone(), listed: file.clone(), content })
    }
}

impl VerifiedFile {
    /// The listed size.
    pub fn size(&self) -> u64 {
        self.listed.size
    }

    /// The bytes at `range` of the file (within its size), as they are read and checked.
    pub fn stream(self, range: Range<u64>) -> impl Stream<Item = std::io::Result<Bytes>> + Send + 'static {
        let VerifiedFile { live, name, listed, content } = self;
        let reading = match content {
            Content::Memory(bytes) => {
                let range = usize::try_from(range.start).unwrap_or(usize::MAX).min(bytes.len())
                    ..usize::try_from(range.end).unwrap_or(usize::MAX).min(bytes.len());
                Reading::Memory(Some(bytes.slice(range)))
            }
            Content::Disk(file) => Reading::Disk(Box::new(Disk {
                file: Some(file),
                hasher: Sha256::new(),
                read: 0,
                range,
                held: None,
                live,
                name,
                listed,
            })),
        };
        futures_util::stream::unfold(reading, |reading| async move {
            match reading {
                Reading::Memory(bytes) => bytes.map(|bytes| (Ok(bytes), Reading::Memory(None))),
                Reading::Disk(mut disk) => disk.next().await.map(|item| (item, Reading::Disk(disk))),
            }
        })
    }
}

enum Reading {
    Memory(Option<Bytes>),
    Disk(Box<Disk>),
}

/// A file on disk part of the way through.
struct Disk {
    /// `None` once the file has read to its end (or failed).
    file: Option<std::fs::File>,
    hasher: Sha256,
    /// Bytes read so far.
    read: u64,
    range: Range<u64>,
    /// The last piece of the range read, sent once the next one (or the end, checked) is.
    held: Option<Bytes>,
    live: LiveCatalog,
    name: SkillName,
    listed: SkillFile,
}

impl Disk {
    /// The next piece of the range to send; `None` when everything is sent.
    async fn next(&mut self) -> Option<std::io::Result<Bytes>> {
        loop {
            let file = self.file.take()?;
            // At most one byte past the listed size: enough to see that the file grew.
            let want = usize::try_from(self.listed.size + 1 - self.read).unwrap_or(CHUNK).min(CHUNK);
            let read = tokio::task::spawn_blocking(move || {
                let mut file = file;
                let mut buffer = vec![0u8; want];
                let count = loop {
                    match file.read(&mut buffer) {
                        Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                        other => break other,
                    }
                };
                count.map(|count| {
                    buffer.truncate(count);
                    (file, buffer)
                })
            })
            .await;
            let (file, chunk) = match read {
                Ok(Ok(read)) => read,
                Ok(Err(error)) => return Some(Err(error)),
                Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
                Err(_) => return Some(Err(std::io::Error::other("the server is shutting down"))),
            };
            if chunk.is_empty() {
                // The end: the held piece goes out only if the whole file was what is listed.
                let digest = Digest::from_sha256(std::mem::take(&mut self.hasher).finalize().into());
                if self.read != self.listed.size || digest != self.listed.digest {
                    let _ = self.live.changed(&self.name);
                    return Some(Err(std::io::Error::other(format!("skill '{}' changed while read", self.name))));
                }
                return self.held.take().map(Ok);
            }
            self.hasher.update(&chunk);
            let (start, end) = (self.read, self.read + chunk.len() as u64);
            self.read = end;
            if end > self.listed.size {
                let _ = self.live.changed(&self.name);
                return Some(Err(std::io::Error::other(format!("skill '{}' changed while read", self.name))));
            }
            self.file = Some(file);
            let from = self.range.start.clamp(start, end);
            let to = self.range.end.clamp(start, end);
            if from < to {
                let mut chunk = Bytes::from(chunk);
                if (from, to) != (start, end) {
                    chunk = chunk.slice((from - start) as usize..(to - start) as usize);
                }
                if let Some(previous) = self.held.replace(chunk) {
                    return Some(Ok(previous));
                }
            }
        }
    }
}
