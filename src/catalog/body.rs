//! A response body prepared once per version: its bytes, its strong tag, and its gzip form, so a
//! request does no serialization, hashing or compression. The bodies every surface answers alike
//! (the listing, an entry, the manifest, a file listing, an archive) are prepared by the catalog;
//! a surface prepares its own encodings (pages, indexes) the same way and keeps them in the views.

use std::io::Write as _;
use std::sync::OnceLock;

use bytes::Bytes;
use http::HeaderValue;
use serde::Serialize;
use sha2::{Digest, Sha256};

/// Bodies at least this large are also kept gzip-compressed.
const COMPRESS_FROM: usize = 1024;

/// A strong entity tag: the quoted first 128 bits of a SHA-256, in hex.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, utoipa::ToSchema)]
#[schema(value_type = String, example = "\"3f2a9c0d5e7b41a8c6d2e9f0a1b3c5d7\"")]
pub struct ETag(String);

impl ETag {
    pub fn of(parts: &[&[u8]]) -> Self {
        let mut hasher = Sha256::new();
        for part in parts {
            hasher.update((part.len() as u64).to_be_bytes());
            hasher.update(part);
        }
        let digest = hasher.finalize();
        let hex: String = digest[..16].iter().map(|byte| format!("{byte:02x}")).collect();
        ETag(format!("\"{hex}\""))
    }

    /// The strong tag of an opaque value such as a digest (which holds no `"`).
    pub fn quoted(opaque: &str) -> Self {
        debug_assert!(!opaque.contains('"'));
        ETag(format!("\"{opaque}\""))
    }

    /// The header value, quotes included.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A response body prepared once per catalog version: its bytes, its tag, and its gzip form
/// once compressed.
#[derive(Debug, Clone)]
pub struct PreparedBody {
    pub bytes: Bytes,
    pub etag: ETag,
    /// The tag as a header value, made once rather than per response.
    pub etag_header: HeaderValue,
    /// Filled by [`Catalog::compress`]: `Some` when the body is large enough and gzip makes it
    /// smaller. Until then the body is sent as is (a client may always get the identity). Boxed:
    /// most bodies (a skill's entry) are too small to have one.
    gzip: OnceLock<Option<Box<GzipBody>>>,
}

/// The gzip representation of a prepared body. It has its own strong tag, the identity tag with
/// `-gzip` inside the quotes: its bytes differ, and a cache that stored one representation
/// must never answer a revalidation of the other with it.
#[derive(Debug, Clone)]
pub struct GzipBody {
    pub bytes: Bytes,
    pub etag_header: HeaderValue,
}

impl PreparedBody {
    pub fn new(bytes: Vec<u8>, etag: ETag) -> Self {
        let etag_header = HeaderValue::from_str(etag.as_str()).expect("tags are visible ASCII");
        PreparedBody { bytes: Bytes::from(bytes), etag, etag_header, gzip: OnceLock::new() }
    }

    /// The gzip representation, if there is one (yet).
    pub fn gzip(&self) -> Option<&GzipBody> {
        self.gzip.get().and_then(Option::as_deref)
    }

    pub fn compress(&self) {
        self.gzip.get_or_init(|| {
            let bytes = if self.bytes.len() >= COMPRESS_FROM { gzip(&self.bytes)? } else { return None };
            let quoted = self.etag.as_str();
            let etag = format!("{}-gzip\"", &quoted[..quoted.len() - 1]);
            let etag_header = HeaderValue::from_str(&etag).expect("tags are visible ASCII");
            Some(Box::new(GzipBody { bytes, etag_header }))
        });
    }
}

fn gzip(bytes: &[u8]) -> Option<Bytes> {
    // The fast level: compressing a large catalog at the default level costs more CPU than the
    // rescan that made it (3 MiB at 10,000 skills), for a few percent smaller answers.
    let mut encoder = flate2::write::GzEncoder::new(Vec::with_capacity(bytes.len() / 4), flate2::Compression::fast());
    encoder.write_all(bytes).ok()?;
    let compressed = encoder.finish().ok()?;
    (compressed.len() < bytes.len()).then(|| Bytes::from(compressed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_compressed_only_when_asked_and_worth_it() {
        let large = PreparedBody::new(vec![b'a'; 4096], ETag::of(&[b"a"]));
        let small = PreparedBody::new(vec![b'a'; 100], ETag::of(&[b"b"]));
        assert!(large.gzip().is_none());
        large.compress();
        small.compress();
        let gzip = large.gzip().expect("compressed");
        assert!(gzip.bytes.len() < 4096);
        assert!(small.gzip().is_none());
        // Its own strong tag, derived from the identity tag.
        let identity = large.etag.as_str();
        assert_eq!(gzip.etag_header, format!("{}-gzip\"", &identity[..identity.len() - 1]));
        assert_ne!(gzip.etag_header, large.etag_header);
    }
}
