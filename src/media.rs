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

/// A one-colour PNG of `width`×`height` pixels: one bit a pixel, its
/// colour the first of a palette of two, so it is small at any size and a
/// request's copy is made another colour in place ([`recolour_png`]),
/// without encoding it again.
///
/// # Errors
/// A size the encoder refuses.
pub fn flat_png(width: u32, height: u32) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, width, height);
    enc.set_color(png::ColorType::Indexed);
    enc.set_depth(png::BitDepth::One);
    enc.set_palette(vec![128, 128, 128, 0, 0, 0]);
    enc.set_compression(png::Compression::Fast);
    let mut writer = enc.write_header().map_err(|e| e.to_string())?;
    let row = (width as usize).div_ceil(8);
    writer
        .write_image_data(&vec![0; row * height as usize])
        .map_err(|e| e.to_string())?;
    writer.finish().map_err(|e| e.to_string())?;
    Ok(out)
}

/// `png`, a [`flat_png`], made `rgb`: its palette's first colour and the
/// palette chunk's CRC rewritten. Any other bytes are left as they are.
pub fn recolour_png(png: &mut [u8], rgb: [u8; 3]) {
    let mut at = 8;
    while at + 12 <= png.len() {
        let len = u32::from_be_bytes([png[at], png[at + 1], png[at + 2], png[at + 3]]) as usize;
        let end = at + 8 + len;
        if end + 4 > png.len() {
            return;
        }
        if &png[at + 4..at + 8] == b"PLTE" && len >= 3 {
            png[at + 8..at + 11].copy_from_slice(&rgb);
            let crc = crc32(&png[at + 4..end]);
            png[end..end + 4].copy_from_slice(&crc.to_be_bytes());
            return;
        }
        at = end + 4;
    }
}

/// CRC-32 (ISO-HDLC, PNG's), bit by bit: a chunk of a few bytes.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recoloured flat PNG decodes (its CRCs hold) to its size, every
    /// pixel the new colour, in about a kilobyte at 512×384.
    #[test]
    fn a_flat_png_is_small_and_recoloured_in_place() {
        let mut bytes = flat_png(512, 384).unwrap();
        assert!(bytes.len() < 4096, "{} bytes", bytes.len());
        recolour_png(&mut bytes, [200, 30, 40]);
        let mut decoder = png::Decoder::new(std::io::Cursor::new(&bytes));
        decoder.set_transformations(png::Transformations::EXPAND);
        let mut reader = decoder.read_info().unwrap();
        let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut pixels).unwrap();
        assert_eq!((info.width, info.height), (512, 384));
        assert!(pixels.chunks(3).all(|p| p == [200, 30, 40]));
        assert_eq!(media_type(&bytes), Some("image/png"));
        assert_eq!(crc32(b"IEND"), 0xAE42_6082);
    }
}
