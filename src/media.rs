//! Media by their bytes, not their names: an image's type from its magic
//! bytes, and the bytes of a base64 `data:` URL. Shared by a suite's images
//! (checked at load) and the simulator (which looks at what it is sent).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// The largest image a suite may send: SGLang's and vLLM's default request
/// size limits are far above any probe's image; past this it is a mistake
/// (a video, a directory of raw frames), not a probe.
pub const MAX_IMAGE_BYTES: usize = 20 * 1024 * 1024;

/// The bytes of a `data:` URL with base64 data, or `None`.
#[must_use]
pub fn data_url_bytes(url: &str) -> Option<Vec<u8>> {
    let (head, data) = url.strip_prefix("data:")?.split_once(',')?;
    head.ends_with(";base64")
        .then(|| STANDARD.decode(data.trim()).ok())
        .flatten()
}

/// The media type by the file's magic bytes.
#[must_use]
pub fn media_type(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(b"\xff\xd8\xff") {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}
