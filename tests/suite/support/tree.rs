//! Builds fixture trees with directory descriptors (never following a symlink), so paths longer
//! than `PATH_MAX` can be made, in a case root whose path is exactly 64 bytes.

use std::ffi::OsString;
use std::io::Write as _;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;
use serde_json::Value;

const ROOT_LENGTH: usize = 64;

/// A temporary directory `T` whose absolute path is exactly 64 bytes; removed on drop.
pub struct CaseRoot {
    _base: tempfile::TempDir,
    path: Vec<u8>,
}

impl CaseRoot {
    pub fn new() -> std::io::Result<Self> {
        let base = tempfile::Builder::new().prefix("sc").tempdir()?;
        let real = std::fs::canonicalize(base.path())?.into_os_string().into_vec();
        let padding = ROOT_LENGTH.checked_sub(real.len() + 1).filter(|n| *n > 0).ok_or_else(|| {
            std::io::Error::other(format!("temporary directory {:?} is too long; set TMPDIR shorter", base.path()))
        })?;
        let mut path = real;
        path.push(b'/');
        path.extend(std::iter::repeat_n(b't', padding));
        std::fs::create_dir(std::ffi::OsStr::from_bytes(&path))?;
        Ok(CaseRoot { _base: base, path })
    }

    pub fn path(&self) -> &[u8] {
        &self.path
    }

    pub fn path_str(&self) -> &str {
        std::str::from_utf8(&self.path).expect("a UTF-8 case root")
    }

    /// A root of a case's source: relative to `T`, `""` meaning `T`.
    pub fn root_path(&self, relative: &str) -> OsString {
        let mut path = self.path.clone();
        if !relative.is_empty() {
            path.push(b'/');
            path.extend_from_slice(relative.as_bytes());
        }
        OsString::from_vec(path)
    }

    /// Writes `T` as `$T` in every string of `value`.
    pub fn relative(&self, value: Value) -> Value {
        let root = String::from_utf8(self.path.clone()).expect("UTF-8 case root");
        fn walk(value: Value, root: &str) -> Value {
            match value {
                Value::String(text) => Value::String(text.replace(root, "$T")),
                Value::Array(items) => Value::Array(items.into_iter().map(|item| walk(item, root)).collect()),
                Value::Object(map) => {
                    Value::Object(map.into_iter().map(|(key, item)| (key, walk(item, root))).collect())
                }
                other => other,
            }
        }
        walk(value, &root)
    }
}

fn decode_hex(text: &str) -> Vec<u8> {
    (0..text.len()).step_by(2).map(|at| u8::from_str_radix(&text[at..at + 2], 16).expect("hex")).collect()
}

fn open_directory(parent: &OwnedFd, name: &[u8]) -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::openat(
        parent,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Creates `entries` (see FORMAT.md) under the case root.
pub fn build(root: &CaseRoot, entries: &[Value]) -> std::io::Result<()> {
    let root_fd = rustix::fs::open(root.path(), OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
    for entry in entries {
        let path = match (entry.get("path"), entry.get("path_hex")) {
            (Some(path), None) => path.as_str().expect("path").as_bytes().to_vec(),
            (None, Some(hex)) => decode_hex(hex.as_str().expect("path_hex")),
            _ => panic!("entry needs path or path_hex: {entry}"),
        };
        let parts: Vec<&[u8]> = path.split(|&b| b == b'/').collect();
        let (name, parents) = parts.split_last().expect("nonempty path");
        let mut parent = rustix::io::dup(&root_fd)?;
        for part in parents {
            match rustix::fs::mkdirat(&parent, *part, Mode::from_raw_mode(0o755)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(error) => return Err(error.into()),
            }
            parent = open_directory(&parent, part)?;
        }
        let mode = Mode::from_raw_mode(0o644);
        if entry.get("dir").is_some() {
            match rustix::fs::mkdirat(&parent, *name, Mode::from_raw_mode(0o755)) {
                Ok(()) => {}
                Err(Errno::EXIST) => drop(open_directory(&parent, name)?),
                Err(error) => return Err(error.into()),
            }
        } else if entry.get("fifo").is_some() {
            rustix::fs::mknodat(&parent, *name, FileType::Fifo, mode, 0)?;
        } else if let Some(target) = entry.get("symlink") {
            let target = target.as_str().expect("symlink target");
            let target = match target.strip_prefix("$T") {
                Some(rest) if rest.is_empty() || rest.starts_with('/') => [root.path(), rest.as_bytes()].concat(),
                _ => target.as_bytes().to_vec(),
            };
            rustix::fs::symlinkat(target.as_slice(), &parent, *name)?;
        } else {
            let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let mut file = std::fs::File::from(rustix::fs::openat(&parent, *name, flags, mode)?);
            if let Some(text) = entry.get("text") {
                file.write_all(text.as_str().expect("text").as_bytes())?;
            } else if let Some(hex) = entry.get("hex") {
                file.write_all(&decode_hex(hex.as_str().expect("hex")))?;
            } else if let Some(fill) = entry.get("fill") {
                let prefix = fill.get("prefix").and_then(Value::as_str).unwrap_or_default().as_bytes();
                let byte = fill["byte"].as_str().expect("fill byte").as_bytes()[0];
                let size = fill["size"].as_u64().expect("fill size") as usize;
                file.write_all(prefix)?;
                let block = vec![byte; 1 << 16];
                let mut left = size - prefix.len();
                while left > 0 {
                    let step = left.min(block.len());
                    file.write_all(&block[..step])?;
                    left -= step;
                }
            } else {
                panic!("entry needs a kind: {entry}");
            }
        }
    }
    Ok(())
}
