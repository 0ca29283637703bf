//! The stored frame: one event as bytes on disk, chained into the log's blake3 hash chain.
//!
//! Layout (all integers little-endian; this layout is the storage contract, pinned by golden
//! fixtures in tests):
//!
//! ```text
//! off  size  field
//!   0     4  magic  b"odf1"
//!   4     2  kind code            (EventKind as u16)
//!   6     2  schema               (payload shape number of that kind)
//!   8     8  seq                  (global sequence, from 1, no gaps)
//!  16     8  version              (stream version, from 0, no gaps)
//!  24     8  recorded_at          (unix milliseconds, i64)
//!  32     2  stream_len
//!  34     2  op_id_len            (0 = no op id)
//!  36     4  payload_len
//!  40    32  prev_hash            (hash of frame seq-1; zeros for seq 1)
//!  72     …  stream bytes, op_id bytes, payload bytes (rkyv)
//! end-32 32  hash = blake3(bytes[0 .. end-32])
//! ```

/// A blake3 digest.
pub type Hash = [u8; 32];

/// `prev_hash` of the first frame in a log.
pub const GENESIS_HASH: Hash = [0u8; 32];

const MAGIC: &[u8; 4] = b"odf1";
const FIXED: usize = 72;
const TRAILER: usize = 32;

/// Why bytes are not a valid frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Fewer bytes than the fixed header and trailer need, or than the lengths declare.
    #[error("frame is truncated: {have} bytes, need {need}")]
    Truncated { have: usize, need: usize },
    /// The first four bytes are not `odf1`.
    #[error("frame magic is wrong")]
    BadMagic,
    /// The frame's own blake3 hash does not match its bytes.
    #[error("frame hash mismatch (the frame's bytes were altered)")]
    HashMismatch,
    /// The stream or op id bytes are not UTF-8.
    #[error("frame {field} is not UTF-8")]
    NotUtf8 { field: &'static str },
}

/// Everything in a frame but the payload and the hashes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameHeader<'a> {
    pub kind: u16,
    pub schema: u16,
    pub seq: u64,
    pub version: u64,
    pub recorded_at: i64,
    pub stream: &'a str,
    pub op_id: Option<&'a str>,
}

/// Frame encoder.
pub struct Frame;

impl Frame {
    /// Encodes a frame chained after `prev_hash`; returns its bytes (hash included).
    pub fn encode(h: &FrameHeader<'_>, payload: &[u8], prev_hash: &Hash) -> Vec<u8> {
        let op = h.op_id.unwrap_or("");
        let len = FIXED + h.stream.len() + op.len() + payload.len() + TRAILER;
        let mut b = Vec::with_capacity(len);
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&h.kind.to_le_bytes());
        b.extend_from_slice(&h.schema.to_le_bytes());
        b.extend_from_slice(&h.seq.to_le_bytes());
        b.extend_from_slice(&h.version.to_le_bytes());
        b.extend_from_slice(&h.recorded_at.to_le_bytes());
        b.extend_from_slice(&(h.stream.len() as u16).to_le_bytes());
        b.extend_from_slice(&(op.len() as u16).to_le_bytes());
        b.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        b.extend_from_slice(prev_hash);
        b.extend_from_slice(h.stream.as_bytes());
        b.extend_from_slice(op.as_bytes());
        b.extend_from_slice(payload);
        let hash = blake3::hash(&b);
        b.extend_from_slice(hash.as_bytes());
        b
    }

    /// Size in bytes a frame with these parts will take.
    pub fn encoded_len(stream: &str, op_id: Option<&str>, payload_len: usize) -> usize {
        FIXED + stream.len() + op_id.map_or(0, str::len) + payload_len + TRAILER
    }
}

/// A parsed view over frame bytes (lengths checked, hash not yet verified).
#[derive(Debug, Clone, Copy)]
pub struct FrameRef<'a> {
    bytes: &'a [u8],
    stream_len: usize,
    op_len: usize,
    payload_len: usize,
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl<'a> FrameRef<'a> {
    /// Checks magic and lengths. Call [`FrameRef::verify`] to check the hash too.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, FrameError> {
        if bytes.len() < FIXED + TRAILER {
            return Err(FrameError::Truncated { have: bytes.len(), need: FIXED + TRAILER });
        }
        if &bytes[0..4] != MAGIC {
            return Err(FrameError::BadMagic);
        }
        let stream_len = u16_at(bytes, 32) as usize;
        let op_len = u16_at(bytes, 34) as usize;
        let payload_len = u32_at(bytes, 36) as usize;
        let need = FIXED + stream_len + op_len + payload_len + TRAILER;
        if bytes.len() != need {
            return Err(FrameError::Truncated { have: bytes.len(), need });
        }
        Ok(Self { bytes, stream_len, op_len, payload_len })
    }

    /// Parses and verifies the frame's own hash.
    pub fn parse_verified(bytes: &'a [u8]) -> Result<Self, FrameError> {
        let f = Self::parse(bytes)?;
        f.verify()?;
        Ok(f)
    }

    /// Recomputes the blake3 hash over the frame and compares it with the stored one.
    pub fn verify(&self) -> Result<(), FrameError> {
        let body = &self.bytes[..self.bytes.len() - TRAILER];
        if blake3::hash(body).as_bytes() == self.hash() {
            Ok(())
        } else {
            Err(FrameError::HashMismatch)
        }
    }

    /// Length in bytes of the whole frame.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Always false: a parsed frame has at least its fixed header.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The raw bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    pub fn kind(&self) -> u16 {
        u16_at(self.bytes, 4)
    }
    pub fn schema(&self) -> u16 {
        u16_at(self.bytes, 6)
    }
    pub fn seq(&self) -> u64 {
        u64_at(self.bytes, 8)
    }
    pub fn version(&self) -> u64 {
        u64_at(self.bytes, 16)
    }
    pub fn recorded_at(&self) -> i64 {
        u64_at(self.bytes, 24) as i64
    }
    pub fn prev_hash(&self) -> &'a Hash {
        self.bytes[40..72].try_into().expect("32 bytes")
    }
    pub fn hash(&self) -> &'a Hash {
        self.bytes[self.bytes.len() - TRAILER..].try_into().expect("32 bytes")
    }

    /// The stream id bytes as a string.
    pub fn stream(&self) -> Result<&'a str, FrameError> {
        std::str::from_utf8(&self.bytes[FIXED..FIXED + self.stream_len])
            .map_err(|_| FrameError::NotUtf8 { field: "stream" })
    }

    /// The op id, if the append carried one.
    pub fn op_id(&self) -> Result<Option<&'a str>, FrameError> {
        let at = FIXED + self.stream_len;
        if self.op_len == 0 {
            return Ok(None);
        }
        std::str::from_utf8(&self.bytes[at..at + self.op_len])
            .map(Some)
            .map_err(|_| FrameError::NotUtf8 { field: "op_id" })
    }

    /// The rkyv payload bytes.
    pub fn payload(&self) -> &'a [u8] {
        let at = FIXED + self.stream_len + self.op_len;
        &self.bytes[at..at + self.payload_len]
    }

    /// The header fields.
    pub fn header(&self) -> Result<FrameHeader<'a>, FrameError> {
        Ok(FrameHeader {
            kind: self.kind(),
            schema: self.schema(),
            seq: self.seq(),
            version: self.version(),
            recorded_at: self.recorded_at(),
            stream: self.stream()?,
            op_id: self.op_id()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(prev: &Hash) -> Vec<u8> {
        let h = FrameHeader {
            kind: 1,
            schema: 2,
            seq: 7,
            version: 3,
            recorded_at: 1_700_000_000_000,
            stream: "note:a",
            op_id: Some("op-1"),
        };
        Frame::encode(&h, b"payload", prev)
    }

    #[test]
    fn roundtrip_and_verify() {
        let b = sample(&GENESIS_HASH);
        assert_eq!(b.len(), Frame::encoded_len("note:a", Some("op-1"), 7));
        let f = FrameRef::parse_verified(&b).unwrap();
        assert_eq!((f.kind(), f.schema(), f.seq(), f.version()), (1, 2, 7, 3));
        assert_eq!(f.stream().unwrap(), "note:a");
        assert_eq!(f.op_id().unwrap(), Some("op-1"));
        assert_eq!(f.payload(), b"payload");
        assert_eq!(f.prev_hash(), &GENESIS_HASH);
    }

    #[test]
    fn every_flipped_byte_is_detected() {
        let b = sample(&[9u8; 32]);
        for i in 0..b.len() {
            let mut c = b.clone();
            c[i] ^= 0x40;
            let ok = FrameRef::parse(&c).and_then(|f| f.verify()).is_ok();
            assert!(!ok, "flip at byte {i} went unnoticed");
        }
    }
}
