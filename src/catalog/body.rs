//! A response body prepared once per version: its bytes, its strong tag, and its gzip form, so a
//! request does no serialization, hashing or compression. The bodies every surface answers alike
//! (the listing, an entry, the manifest, a file listing, an archive) are prepared by the catalog;
//! a surface prepares its own encodings (pages, indexes) the same way and keeps them in the views.

use std::collections::HashMap;
use std::sync::OnceLock;

use bytes::Bytes;
use http::HeaderValue;
use serde::Serialize;
use sha2::{Digest, Sha256};

/// Bodies at least this large are also kept gzip-compressed.
const COMPRESS_FROM: usize = 1024;

/// The gzip header of every compressed body: deflate, no name, no time, the fast level, an
/// unknown system (what flate2's encoder writes at that level).
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 4, 0xff];

/// A final, empty deflate block (fixed Huffman codes, nothing but the end of the block): it ends
/// a stream of pieces, each of which ends with a byte-aligned, non-final block.
const FINAL_BLOCK: [u8; 2] = [0x03, 0x00];

/// How many bytes at the start of a piece find the earlier piece that may be the same.
const PIECE_KEY: usize = 64;

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
        let mut tag = String::with_capacity(34);
        tag.push('"');
        skillcat_core::push_hex(&mut tag, &digest[..16]);
        tag.push('"');
        ETag(tag)
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
    /// For a body compressed in pieces, where each lies (see [`PreparedBody::compress_in_pieces`]).
    pieces: Box<[Piece]>,
}

/// A piece of a body compressed on its own: where its bytes lie in the body, where their deflate
/// blocks lie in the gzip form, and their CRC-32.
#[derive(Debug, Clone, Copy)]
struct Piece {
    raw: (usize, usize),
    packed: (usize, usize),
    crc: u32,
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

    /// Prepares the gzip form, if the body is large enough and gzip makes it smaller: one piece.
    pub fn compress(&self) {
        self.compress_in_pieces(&[], None);
    }

    /// Prepares the gzip form as [`compress`](Self::compress) does, from pieces cut at `cuts`
    /// (increasing offsets into the body), each compressed on its own: a piece whose bytes
    /// `earlier` (a body compressed the same way) holds too is copied from its gzip form, not
    /// compressed again. A body that changes by a few pieces from one version to the next (the
    /// listing of a large catalog) then costs a few pieces' compression, not the whole body's.
    /// The pieces' deflate blocks make one gzip stream, as any decoder reads it.
    pub fn compress_in_pieces(&self, cuts: &[usize], earlier: Option<&PreparedBody>) {
        self.gzip.get_or_init(|| {
            if self.bytes.len() < COMPRESS_FROM {
                return None;
            }
            let earlier = earlier.and_then(|earlier| Some((&earlier.bytes, earlier.gzip()?)));
            let (bytes, pieces, _compressed) = gzip_in_pieces(&self.bytes, cuts, earlier)?;
            Some(self.gzip_body(bytes, pieces))
        });
    }

    fn gzip_body(&self, bytes: Bytes, pieces: Box<[Piece]>) -> Box<GzipBody> {
        let quoted = self.etag.as_str();
        let etag = format!("{}-gzip\"", &quoted[..quoted.len() - 1]);
        let etag_header = HeaderValue::from_str(&etag).expect("tags are visible ASCII");
        Box::new(GzipBody { bytes, etag_header, pieces })
    }
}

/// `bytes` gzip-compressed piece by piece, and how many pieces were compressed (not copied from
/// `earlier`); `None` if that makes them no smaller.
fn gzip_in_pieces(
    bytes: &[u8],
    cuts: &[usize],
    earlier: Option<(&Bytes, &GzipBody)>,
) -> Option<(Bytes, Box<[Piece]>, usize)> {
    // The earlier pieces by their length and first bytes; a candidate is taken only if all its
    // bytes are the same.
    let mut known: HashMap<(usize, &[u8]), Piece> = HashMap::new();
    if let Some((raw, gzip)) = earlier {
        for piece in &gzip.pieces {
            let text = &raw[piece.raw.0..piece.raw.1];
            known.insert((text.len(), &text[..text.len().min(PIECE_KEY)]), *piece);
        }
    }
    // Each piece's span, with its deflate blocks and CRC when the earlier form has them.
    type Span<'a> = ((usize, usize), Option<(&'a [u8], u32)>);
    let mut spans: Vec<Span<'_>> = Vec::with_capacity(cuts.len() + 1);
    let mut start = 0;
    for end in cuts.iter().copied().chain(std::iter::once(bytes.len())) {
        let text = &bytes[start..end];
        if !text.is_empty() {
            let same = known.get(&(text.len(), &text[..text.len().min(PIECE_KEY)])).and_then(|piece| {
                let (raw, gzip) = earlier?;
                (raw[piece.raw.0..piece.raw.1] == *text)
                    .then(|| (&gzip.bytes[piece.packed.0..piece.packed.1], piece.crc))
            });
            spans.push(((start, end), same));
        }
        start = end;
    }
    let fresh: Vec<&[u8]> =
        (spans.iter()).filter(|(_, same)| same.is_none()).map(|&((start, end), _)| &bytes[start..end]).collect();
    let mut compressed = deflate_pieces(&fresh)?.into_iter();
    let size_hint = earlier.map_or(bytes.len() / 4, |(_, gzip)| gzip.bytes.len() + 4096);
    let mut out = Vec::with_capacity(size_hint);
    out.extend_from_slice(&GZIP_HEADER);
    let mut crc = crc32fast::Hasher::new();
    let mut pieces = Vec::with_capacity(spans.len());
    for ((start, end), same) in spans {
        let packed_start = out.len();
        let piece_crc = match same {
            Some((packed, crc)) => {
                out.extend_from_slice(packed);
                crc
            }
            None => {
                let (packed, crc) = compressed.next().expect("one per fresh piece");
                out.extend_from_slice(&packed);
                crc
            }
        };
        crc.combine(&crc32fast::Hasher::new_with_initial_len(piece_crc, (end - start) as u64));
        pieces.push(Piece { raw: (start, end), packed: (packed_start, out.len()), crc: piece_crc });
    }
    out.extend_from_slice(&FINAL_BLOCK);
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    // The size modulo 2^32, as gzip's trailer holds it.
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    (out.len() < bytes.len()).then(|| (Bytes::from(out), pieces.into_boxed_slice(), fresh.len()))
}

/// Below this many pieces to compress, one thread compresses them all.
const PIECES_PER_THREAD: usize = 16;

/// Each of `texts` as raw deflate blocks and its CRC-32, on as many threads as there are cores
/// when they are many (the first catalog's listing, on the way to ready): the pieces are
/// independent of one another.
fn deflate_pieces(texts: &[&[u8]]) -> Option<Vec<(Vec<u8>, u32)>> {
    let chunks = crate::parallel::in_chunks(texts, PIECES_PER_THREAD, |texts| {
        let mut deflate = Deflate::new();
        texts.iter().map(|text| Some((deflate.piece(text)?, crc32fast::hash(text)))).collect::<Option<Vec<_>>>()
    });
    Some(chunks.into_iter().collect::<Option<Vec<_>>>()?.into_iter().flatten().collect())
}

/// A compressor of pieces, kept from one piece to the next: making one zeroes several hundred
/// KiB of tables, more work than compressing a piece of the listing.
struct Deflate(flate2::Compress);

impl Deflate {
    fn new() -> Self {
        // The fast level: compressing a large catalog at the default level costs more CPU than the
        // rescan that made it (3 MiB at 10,000 skills), for a few percent smaller answers.
        Deflate(flate2::Compress::new(flate2::Compression::fast(), false))
    }

    /// `text` as raw deflate blocks that need nothing before them and end byte-aligned and not
    /// final, so that such pieces can follow one another in any order: a full flush ends each,
    /// which also forgets what came before (no match reaches back into an earlier piece).
    fn piece(&mut self, text: &[u8]) -> Option<Vec<u8>> {
        let deflate = &mut self.0;
        let before = deflate.total_in();
        let mut out = Vec::with_capacity(text.len() / 2 + 64);
        loop {
            let read = usize::try_from(deflate.total_in() - before).ok()?;
            deflate.compress_vec(&text[read..], &mut out, flate2::FlushCompress::Full).ok()?;
            // Done when all is read and the flush left room unused (it did not stop for lack of it).
            if usize::try_from(deflate.total_in() - before).ok()? == text.len() && out.len() < out.capacity() {
                return Some(out);
            }
            out.reserve(4096);
        }
    }
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

    fn gunzip(bytes: &[u8]) -> Vec<u8> {
        let mut plain = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(bytes), &mut plain).expect("one gzip stream");
        plain
    }

    #[test]
    fn a_body_compressed_in_pieces_is_one_gzip_stream_and_reuses_the_pieces_it_shares() {
        // Entries with keys; a piece starts at each key divisible by 50 (as the listing's pieces
        // start at skills, not at offsets, so that an entry added moves no other cut).
        let entries: Vec<(u32, String)> = (0..400)
            .map(|n| (n, format!("{{\"name\":\"skill-{n}\",\"description\":\"Does thing {}\"}},", n * 7919)))
            .collect();
        let body = |entries: &[(u32, String)]| -> (Vec<u8>, Vec<usize>) {
            let (mut bytes, mut cuts) = (b"{\"head\":[".to_vec(), Vec::new());
            for (key, entry) in entries {
                if key % 50 == 0 {
                    cuts.push(bytes.len());
                }
                bytes.extend_from_slice(entry.as_bytes());
            }
            bytes.extend_from_slice(b"]}");
            (bytes, cuts)
        };
        let (bytes, cuts) = body(&entries);
        let first = PreparedBody::new(bytes.clone(), ETag::of(&[&bytes]));
        first.compress_in_pieces(&cuts, None);
        let gzip = first.gzip().expect("compressed");
        assert_eq!(gunzip(&gzip.bytes), bytes);
        assert!(gzip.bytes.len() < bytes.len() / 2, "{} of {}", gzip.bytes.len(), bytes.len());
        assert_eq!(gzip.pieces.len(), cuts.len() + 1);

        // One entry edited, one added: the two pieces holding them are compressed again; the
        // others are copied.
        let mut changed = entries.clone();
        changed[120].1 = "{\"name\":\"skill-120\",\"description\":\"Edited\"},".to_owned();
        changed.insert(333, (1, "{\"name\":\"new\",\"description\":\"Added\"},".to_owned()));
        let (bytes, cuts) = body(&changed);
        let (gzipped, pieces, compressed) =
            gzip_in_pieces(&bytes, &cuts, Some((&first.bytes, gzip))).expect("compressed");
        assert_eq!(gunzip(&gzipped), bytes);
        assert_eq!(compressed, 2, "of {} pieces", pieces.len());
        // Without the earlier body, the same bytes.
        let (alone, _, all) = gzip_in_pieces(&bytes, &cuts, None).expect("compressed");
        assert_eq!((alone, all), (gzipped, pieces.len()));
        // No cuts at all: one piece, still one stream.
        let (single, _, _) = gzip_in_pieces(&bytes, &[], None).expect("compressed");
        assert_eq!(gunzip(&single), bytes);
    }

    #[test]
    fn a_piece_compresses_to_the_same_bytes_whatever_came_before_it_and_on_any_thread() {
        // Repetitive across pieces (a match would reach back into the piece before) and longer
        // than the compressor's 32 KiB window, in more pieces than one thread takes.
        let texts: Vec<Vec<u8>> = (0..100)
            .map(|n| (0..(n % 7 + 1) * 900).map(|k| format!("{{\"skill-{}\":{k}}},", k % 50)).collect::<String>())
            .map(String::into_bytes)
            .collect();
        let texts: Vec<&[u8]> = texts.iter().map(Vec::as_slice).collect();
        let alone: Vec<Vec<u8>> = texts.iter().map(|text| Deflate::new().piece(text).expect("compressed")).collect();
        let together = deflate_pieces(&texts).expect("compressed");
        assert_eq!(together.len(), texts.len());
        for ((packed, crc), (alone, text)) in together.iter().zip(alone.iter().zip(&texts)) {
            assert_eq!(packed, alone);
            assert_eq!(*crc, crc32fast::hash(text));
        }
        // Any piece after any other decodes on its own.
        let mut stream = GZIP_HEADER.to_vec();
        let (mut plain, mut crc) = (Vec::new(), crc32fast::Hasher::new());
        for index in [57, 3, 99, 3, 0] {
            stream.extend_from_slice(&together[index].0);
            plain.extend_from_slice(texts[index]);
            crc.update(texts[index]);
        }
        stream.extend_from_slice(&FINAL_BLOCK);
        stream.extend_from_slice(&crc.finalize().to_le_bytes());
        stream.extend_from_slice(&(plain.len() as u32).to_le_bytes());
        assert_eq!(gunzip(&stream), plain);
    }
}
