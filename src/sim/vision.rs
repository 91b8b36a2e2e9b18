//! What a vision profile (`vision: true`) sees of an image: its size and
//! its dominant colour, enough to answer "what colour is this?" rightly for
//! one image and wrongly for another, so an image probe is tested honestly.
//! The model sees each image as the words `<image: red>` after the text of
//! its message, which a profile's replies match; it counts as many prompt
//! tokens as a Qwen2-VL-style encoder gives it (a token per 28×28 patch).

use crate::media::{data_url_bytes, media_type};

/// The most pixels the simulator decodes: a 100-byte PNG may declare
/// 2^30×2^30, and the simulator is a network server.
const MAX_PIXELS: u64 = 32 * 1024 * 1024;

/// Pixels per side of the patch one image token stands for (14-pixel
/// patches merged two by two, as Qwen2-VL and Kimi's `MoonViT` do).
const PATCH: u32 = 28;

/// The colours an image is named by, with their RGB.
const PALETTE: &[(&str, [u8; 3])] = &[
    ("black", [0, 0, 0]),
    ("white", [255, 255, 255]),
    ("grey", [128, 128, 128]),
    ("red", [220, 30, 30]),
    ("green", [30, 170, 30]),
    ("blue", [30, 60, 220]),
    ("yellow", [240, 220, 30]),
    ("orange", [250, 140, 0]),
    ("purple", [130, 40, 170]),
];

/// What the model saw of one image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Seen {
    /// The palette colour most of its pixels are nearest.
    pub(super) colour: &'static str,
    /// Prompt tokens the image takes.
    pub(super) tokens: u64,
}

/// Looks at the image at `url`: a `data:` URL of a PNG.
pub(super) fn look(url: &str) -> Result<Seen, String> {
    let bytes = data_url_bytes(url).ok_or_else(|| {
        let head: String = url.chars().take(40).collect();
        format!("the simulator reads images from base64 `data:` URLs only, not `{head}`")
    })?;
    if media_type(&bytes) != Some("image/png") {
        return Err(format!(
            "the simulator decodes PNG images only; this one is {}",
            media_type(&bytes).unwrap_or("no image it knows")
        ));
    }
    let mut decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder
        .read_info()
        .map_err(|e| format!("the PNG does not decode: {e}"))?;
    let (width, height) = (reader.info().width, reader.info().height);
    if u64::from(width) * u64::from(height) > MAX_PIXELS {
        return Err(format!(
            "the PNG is {width}×{height} pixels, more than the simulator decodes ({MAX_PIXELS})"
        ));
    }
    let mut pixels = vec![0; reader.output_buffer_size().ok_or("the PNG is too large")?];
    let frame = reader
        .next_frame(&mut pixels)
        .map_err(|e| format!("the PNG does not decode: {e}"))?;
    let channels = frame.color_type.samples();
    let mut votes = [0u64; PALETTE.len()];
    for px in pixels[..frame.buffer_size()].chunks_exact(channels) {
        let rgb = if channels < 3 {
            [px[0]; 3]
        } else {
            [px[0], px[1], px[2]]
        };
        votes[nearest(rgb)] += 1;
    }
    let best = (0..PALETTE.len()).max_by_key(|&i| votes[i]).unwrap_or(0);
    Ok(Seen {
        colour: PALETTE[best].0,
        tokens: (u64::from(frame.width.div_ceil(PATCH)) * u64::from(frame.height.div_ceil(PATCH)))
            .max(1),
    })
}

fn nearest(rgb: [u8; 3]) -> usize {
    let distance = |c: &[u8; 3]| -> u32 {
        (0..3)
            .map(|i| u32::from(rgb[i].abs_diff(c[i])).pow(2))
            .sum()
    };
    (0..PALETTE.len())
        .min_by_key(|&i| distance(&PALETTE[i].1))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;

    fn data_url(w: u32, h: u32, colour: png::ColorType, pixel: &[u8]) -> String {
        let mut out = Vec::new();
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(colour);
        let mut writer = enc.write_header().unwrap();
        writer
            .write_image_data(&pixel.repeat((w * h) as usize))
            .unwrap();
        writer.finish().unwrap();
        format!(
            "data:image/png;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(out)
        )
    }

    #[test]
    fn an_image_is_seen_by_its_dominant_colour_and_size() {
        let red = look(&data_url(64, 48, png::ColorType::Rgb, &[230, 20, 25])).unwrap();
        assert_eq!(
            red,
            Seen {
                colour: "red",
                tokens: 3 * 2
            }
        );
        let blue = look(&data_url(10, 10, png::ColorType::Rgba, &[20, 50, 200, 255])).unwrap();
        assert_eq!(blue.colour, "blue");
        assert_eq!(blue.tokens, 1);
        let white = look(&data_url(3, 3, png::ColorType::Grayscale, &[250])).unwrap();
        assert_eq!(white.colour, "white");
    }

    /// A few bytes that declare a vast image are refused before a buffer
    /// is made for it.
    #[test]
    fn a_png_declaring_a_vast_image_is_refused_unread() {
        // The signature, then IHDR and an empty IDAT, each with its CRC.
        let chunk = |kind: &[u8], data: &[u8]| {
            let mut crc = flate2::Crc::new();
            crc.update(kind);
            crc.update(data);
            let len = u32::try_from(data.len()).unwrap().to_be_bytes();
            [&len[..], kind, data, &crc.sum().to_be_bytes()].concat()
        };
        let declaring = |side: u32| {
            let side = side.to_be_bytes();
            let ihdr = [&side[..], &side, &[8, 0, 0, 0, 0]].concat();
            let png = [
                &b"\x89PNG\r\n\x1a\n"[..],
                &chunk(b"IHDR", &ihdr),
                &chunk(b"IDAT", &[]),
            ]
            .concat();
            format!(
                "data:image/png;base64,{}",
                base64::engine::general_purpose::STANDARD.encode(png)
            )
        };
        // Past the decoder's own memory limit (64 MiB of pixels).
        let e = look(&declaring(1 << 30)).unwrap_err();
        assert!(e.contains("limits are exceeded"), "{e}");
        // Within it, but more pixels than the simulator decodes.
        let e = look(&declaring(8000)).unwrap_err();
        assert!(
            e.contains("8000×8000 pixels, more than the simulator decodes"),
            "{e}"
        );
    }

    #[test]
    fn what_it_cannot_read_is_said() {
        assert!(
            look("https://example.com/cat.png")
                .unwrap_err()
                .contains("data:")
        );
        let gif = format!(
            "data:image/gif;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(b"GIF89a\x01\x00\x01\x00")
        );
        assert!(look(&gif).unwrap_err().contains("image/gif"));
    }
}
