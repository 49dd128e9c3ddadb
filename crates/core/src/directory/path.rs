//! Root paths made absolute the way nagents makes them: `Path(os.path.abspath(Path(root).expanduser()))`.
//!
//! Everything is lexical: no symlink is resolved and nothing is checked to exist.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// A lexically absolute root, printed exactly as Python prints it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AbsoluteRoot(Vec<u8>);

impl AbsoluteRoot {
    /// Expands a leading `~` or `~user`, joins relative paths to the current directory and
    /// normalizes `.`, `..` and repeated slashes without touching the filesystem.
    pub fn new(root: &OsStr) -> io::Result<Self> {
        let path = pathlib_normalize(root.as_bytes());
        let path = expand_user(path)?;
        let path = if path.starts_with(b"/") {
            path
        } else {
            let mut joined = std::env::current_dir()?.into_os_string().into_vec();
            if !joined.ends_with(b"/") {
                joined.push(b'/');
            }
            joined.extend_from_slice(&path);
            joined
        };
        Ok(AbsoluteRoot(pathlib_normalize(&normpath(&path))))
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn as_os_str(&self) -> &OsStr {
        OsStr::from_bytes(&self.0)
    }

    /// The final component, as Python's `Path.name` (empty for `/`).
    pub fn name(&self) -> &[u8] {
        last_component(&self.0)
    }

    /// The root as text; a non-UTF-8 byte shows as U+FFFD.
    pub fn display(&self) -> String {
        String::from_utf8_lossy(&self.0).into_owned()
    }

    pub fn into_os_string(self) -> OsString {
        OsString::from_vec(self.0)
    }
}

/// `str(path / name)` for a directory path and a child name.
pub(crate) fn join(directory: &[u8], name: &[u8]) -> Vec<u8> {
    let mut path = Vec::with_capacity(directory.len() + 1 + name.len());
    join_into(&mut path, directory, name);
    path
}

/// [`join`] into `path`, which it clears first (a buffer reused across paths).
pub(crate) fn join_into(path: &mut Vec<u8>, directory: &[u8], name: &[u8]) {
    path.clear();
    path.extend_from_slice(directory);
    if !path.ends_with(b"/") {
        path.push(b'/');
    }
    path.extend_from_slice(name);
}

/// Python's `PurePosixPath.name`.
pub(crate) fn last_component(path: &[u8]) -> &[u8] {
    path.rsplit(|&b| b == b'/').find(|part| !part.is_empty()).unwrap_or_default()
}

/// The anchor Python keeps: exactly two leading slashes stay two, one or three-plus become one.
fn leading_slashes(path: &[u8]) -> &'static [u8] {
    if path.starts_with(b"//") && !path.starts_with(b"///") {
        b"//"
    } else if path.starts_with(b"/") {
        b"/"
    } else {
        b""
    }
}

/// `str(PurePosixPath(path))`: drops empty and `.` components, keeps `..`.
fn pathlib_normalize(path: &[u8]) -> Vec<u8> {
    let anchor = leading_slashes(path);
    let parts: Vec<&[u8]> = path.split(|&b| b == b'/').filter(|part| !part.is_empty() && *part != b".").collect();
    let mut out = anchor.to_vec();
    out.extend_from_slice(&parts.join(&b'/'));
    if out.is_empty() {
        out.push(b'.');
    }
    out
}

/// `posixpath.normpath`.
fn normpath(path: &[u8]) -> Vec<u8> {
    let anchor = leading_slashes(path);
    let mut parts: Vec<&[u8]> = Vec::new();
    for part in path.split(|&b| b == b'/') {
        match part {
            b"" | b"." => {}
            b".." if !anchor.is_empty() || parts.last().is_some_and(|last| *last != b"..") => {
                // `..` above an absolute root stays at the root.
                if parts.last().is_some_and(|last| *last != b"..") {
                    parts.pop();
                }
            }
            part => parts.push(part),
        }
    }
    let mut out = anchor.to_vec();
    out.extend_from_slice(&parts.join(&b'/'));
    if out.is_empty() {
        out.push(b'.');
    }
    out
}

/// `Path.expanduser()`: `~` is `$HOME`, `~user` that user's home directory from the password
/// database; an unknown user is an error, as in Python.
fn expand_user(path: Vec<u8>) -> io::Result<Vec<u8>> {
    if !path.starts_with(b"~") {
        return Ok(path);
    }
    let end = path.iter().position(|&b| b == b'/').unwrap_or(path.len());
    let user = &path[1..end];
    let home = if user.is_empty() { std::env::var_os("HOME").map(OsString::into_vec) } else { home_of(user) }
        .ok_or_else(|| io::Error::other("Could not determine home directory."))?;
    let mut expanded = home;
    while expanded.ends_with(b"/") {
        expanded.pop();
    }
    expanded.extend_from_slice(&path[end..]);
    if expanded.is_empty() {
        expanded.push(b'/');
    }
    Ok(pathlib_normalize(&expanded))
}

fn home_of(user: &[u8]) -> Option<Vec<u8>> {
    let passwd = std::fs::read("/etc/passwd").ok()?;
    passwd.split(|&b| b == b'\n').find_map(|line| {
        let fields: Vec<&[u8]> = line.split(|&b| b == b':').collect();
        (fields.len() >= 7 && fields[0] == user).then(|| fields[5].to_vec())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(path: &str) -> String {
        String::from_utf8(pathlib_normalize(&normpath(path.as_bytes()))).unwrap()
    }

    #[test]
    fn normalizes_like_python() {
        assert_eq!(norm("/a/./b//c/"), "/a/b/c");
        assert_eq!(norm("/a/../../b"), "/b");
        assert_eq!(norm("/.."), "/");
        assert_eq!(norm("//a/b"), "//a/b");
        assert_eq!(norm("///a/b"), "/a/b");
        assert_eq!(norm("/a/b/.."), "/a");
    }

    #[test]
    fn relative_roots_join_the_current_directory() {
        let cwd = std::env::current_dir().unwrap();
        let root = AbsoluteRoot::new(OsStr::new("x/../y")).unwrap();
        assert_eq!(root.as_os_str(), cwd.join("y").as_os_str());
        let root = AbsoluteRoot::new(OsStr::new("")).unwrap();
        assert_eq!(root.as_os_str(), cwd.as_os_str());
    }

    #[test]
    fn names_and_joins() {
        assert_eq!(last_component(b"/"), b"");
        assert_eq!(last_component(b"/a/b"), b"b");
        assert_eq!(join(b"/", b"x"), b"/x");
        assert_eq!(join(b"/a", b"x"), b"/a/x");
    }
}
