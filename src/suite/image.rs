//! Images a probe sends: a file read when the suite loads and sent as a
//! `data:` URL, a `data:` URL checked when the suite loads, or an http(s)
//! URL the server fetches itself. Each keeps its name and what it is in
//! words, so a failure and a record say which image without its bytes.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::media::{MAX_IMAGE_BYTES, media_type};

/// An image a message carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// Where it came from as the suite wrote it: the file's path, or the
    /// URL (a `data:` URL's head only).
    pub name: String,
    /// What is sent: a `data:` URL, or the http(s) URL as written.
    pub url: Arc<str>,
    /// Its media type, pixel size and bytes in words, as far as known
    /// (`image/png, 64×48, 1.2 KiB`).
    pub about: String,
}

impl fmt::Display for Image {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.about.is_empty() {
            write!(f, "{}", self.name)
        } else {
            write!(f, "{} ({})", self.name, self.about)
        }
    }
}

/// An image read from `path` (`shown` is the path as the suite wrote it).
///
/// # Errors
/// The file cannot be read, is too large, or is not a PNG, JPEG, GIF or
/// WebP image.
pub fn from_file(path: &Path, shown: &str) -> Result<Image, String> {
    use std::io::Read as _;
    let cannot = |e: std::io::Error| format!("cannot read `{shown}`: {e}");
    let file = std::fs::File::open(path).map_err(cannot)?;
    // Opened once, a regular file, and read at most one byte past the
    // bound: not a device that never ends, a FIFO that never opens, or a
    // file that grew after its size was read.
    if !file.metadata().map_err(cannot)?.is_file() {
        return Err(format!("`{shown}` is not a regular file"));
    }
    let mut bytes = Vec::new();
    file.take(MAX_IMAGE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() > MAX_IMAGE_BYTES {
        return Err(format!(
            "`{shown}` is more than the {MAX_IMAGE_BYTES} bytes an image may be"
        ));
    }
    let media = media_type(&bytes)
        .ok_or_else(|| format!("`{shown}` is not a PNG, JPEG, GIF or WebP image"))?;
    Ok(Image {
        name: shown.to_owned(),
        url: format!("data:{media};base64,{}", STANDARD.encode(&bytes)).into(),
        about: about(media, &bytes),
    })
}

/// An image named by URL: a `data:` URL (its base64 decoded and its type
/// checked now, not by the server at run time) or an http(s) URL, which
/// the server fetches.
///
/// # Errors
/// Another scheme, or a `data:` URL that is not a base64 image.
pub fn from_url(url: &str) -> Result<Image, String> {
    if url.starts_with("http://") || url.starts_with("https://") {
        return Ok(Image {
            name: crate::secrets::cut(&crate::text::printable(url), 200).0,
            url: url.into(),
            about: String::new(),
        });
    }
    let Some(rest) = url.strip_prefix("data:") else {
        return Err("an image is a file's path, a `data:` URL or an http(s) URL".to_owned());
    };
    let (head, data) = rest
        .split_once(',')
        .ok_or("a `data:` URL has a `,` before its data")?;
    // The head as errors and the image's name show it: escaped, and cut.
    let shown = crate::secrets::cut(&crate::text::printable(head), 60).0;
    let Some(declared) = head.strip_suffix(";base64") else {
        return Err(format!(
            "`data:{shown},…` is not base64: an image's `data:` URL ends its head with `;base64`"
        ));
    };
    let bytes = STANDARD
        .decode(data.trim())
        .map_err(|e| format!("the `data:{shown},…` URL's base64 does not decode: {e}"))?;
    let media = media_type(&bytes).ok_or_else(|| {
        format!("the `data:{shown},…` URL's bytes are not a PNG, JPEG, GIF or WebP image")
    })?;
    if declared != media {
        return Err(format!(
            "the `data:{shown},…` URL's type is not its bytes' `{media}`"
        ));
    }
    Ok(Image {
        name: format!("data:{shown},…"),
        url: url.into(),
        about: about(media, &bytes),
    })
}

fn about(media: &str, bytes: &[u8]) -> String {
    let size = crate::units::format_bytes(bytes.len() as u64);
    match dimensions(bytes) {
        Some((w, h)) => format!("{media}, {w}×{h}, {size}"),
        None => format!("{media}, {size}"),
    }
}

/// Width and height, read from a PNG's `IHDR`, a GIF's screen descriptor or
/// a JPEG's start-of-frame; `None` for others or a truncated header.
fn dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
    let be32 = |at: usize| {
        bytes
            .get(at..at + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    match media_type(bytes)? {
        "image/png" if bytes.get(12..16) == Some(b"IHDR") => Some((be32(16)?, be32(20)?)),
        "image/gif" => {
            let le16 = |at: usize| {
                bytes
                    .get(at..at + 2)
                    .map(|b| u32::from(b[0]) | u32::from(b[1]) << 8)
            };
            Some((le16(6)?, le16(8)?))
        }
        "image/jpeg" => jpeg_dimensions(bytes),
        _ => None,
    }
}

/// A JPEG's size from its first start-of-frame marker (SOF0–SOF15 but the
/// DHT, JPG and DAC markers that share the range).
fn jpeg_dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
    let be16 = |at: usize| {
        bytes
            .get(at..at + 2)
            .map(|b| u32::from(b[0]) << 8 | u32::from(b[1]))
    };
    let mut at = 2;
    while at + 4 <= bytes.len() {
        if bytes[at] != 0xFF {
            return None;
        }
        let marker = bytes[at + 1];
        let len = usize::try_from(be16(at + 2)?).ok()?;
        if (0xC0..=0xCF).contains(&marker) && !matches!(marker, 0xC4 | 0xC8 | 0xCC) {
            return Some((be16(at + 7)?, be16(at + 5)?));
        }
        at += 2 + len;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(w: u32, h: u32) -> Vec<u8> {
        let mut out = Vec::new();
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgb);
        let mut writer = enc.write_header().unwrap();
        writer
            .write_image_data(&vec![200; (w * h * 3) as usize])
            .unwrap();
        writer.finish().unwrap();
        out
    }

    #[test]
    fn a_file_becomes_a_data_url_that_names_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("grey.png");
        std::fs::write(&path, png(64, 48)).unwrap();
        let image = from_file(&path, "grey.png").unwrap();
        assert!(image.url.starts_with("data:image/png;base64,"));
        assert_eq!(
            crate::media::data_url_bytes(&image.url).unwrap(),
            png(64, 48)
        );
        assert!(
            image
                .to_string()
                .starts_with("grey.png (image/png, 64×48, "),
            "{image}"
        );
        let again = from_url(&image.url).unwrap();
        assert_eq!(again.about, image.about);
    }

    #[test]
    fn what_is_not_an_image_is_refused_with_its_reason() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.txt");
        std::fs::write(&path, "hello").unwrap();
        let e = from_file(&path, "notes.txt").unwrap_err();
        assert!(e.contains("not a PNG, JPEG, GIF or WebP"), "{e}");
        let e = from_url("data:image/png,abc").unwrap_err();
        assert!(e.contains("not base64"), "{e}");
        let e = from_url("data:image/jpeg;base64,aGVsbG8=").unwrap_err();
        assert!(e.contains("not a PNG, JPEG"), "{e}");
        let url = format!("data:image/jpeg;base64,{}", STANDARD.encode(png(2, 2)));
        let e = from_url(&url).unwrap_err();
        assert!(e.contains("type is not its bytes' `image/png`"), "{e}");
        assert!(from_url("ftp://x/y.png").is_err());
        assert_eq!(
            from_url("https://x/y.png").unwrap().url.as_ref(),
            "https://x/y.png"
        );
    }

    #[test]
    fn jpeg_and_gif_sizes_are_read_from_their_headers() {
        // SOI, an APP0 of 16 bytes, SOF0 of a 3×2 image.
        let mut jpeg = vec![0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10];
        jpeg.extend([0; 14]);
        jpeg.extend([0xFF, 0xC0, 0x00, 0x11, 0x08, 0x00, 0x02, 0x00, 0x03]);
        assert_eq!(dimensions(&jpeg), Some((3, 2)));
        let gif = b"GIF89a\x05\x00\x07\x00";
        assert_eq!(dimensions(gif), Some((5, 7)));
        assert_eq!(dimensions(&jpeg[..10]), None);
    }
}
