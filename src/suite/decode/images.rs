//! Decoding a load's `images:`: how many each request sends, and either
//! one-colour PNGs of a size (`size: 512x512`) or the image files of a
//! directory (`dir:`), read when the suite loads.

use std::path::Path;
use std::sync::Arc;

use super::schema::gate::LOAD_IMAGES;
use super::{Decoder, Fields};
use crate::suite::diagnostics::Diagnostic;
use crate::suite::image::{self, Image};
use crate::suite::model::{Api, ImageSource, LoadImages};
use crate::suite::node::Yaml;

/// Most images a request of a load sends.
pub(super) const MAX_LOAD_IMAGES: u32 = 16;
/// Most pixels across or down a generated image.
pub(super) const MAX_IMAGE_SIDE: u32 = 8192;
/// Most image files a load's directory may hold.
const MAX_DIR_IMAGES: usize = 1000;
/// Most bytes of them all.
const MAX_DIR_BYTES: usize = 512 * 1024 * 1024;
/// The file names read as images; others in the directory are left alone.
const IMAGE_EXTENSIONS: &[&str] = &["png", "jpg", "jpeg", "gif", "webp"];

impl Decoder<'_> {
    /// `images: {count: N, size: WxH}` or `images: {count: N, dir: PATH}`.
    pub(super) fn load_images(
        &mut self,
        y: &Yaml,
        api: Api,
        load: &Fields<'_>,
    ) -> Option<LoadImages> {
        let at = load.key("images").map_or(y.loc, |k| k.loc);
        self.images_need(api, at);
        if let Some(k) = load.key("conversation") {
            self.error(
                Diagnostic::new(k.loc, "`conversation` does not go with `images`")
                    .expected("images on single requests, or a conversation of text"),
            );
            return None;
        }
        let f = self.fields(y, "images", &[LOAD_IMAGES])?;
        let count = f
            .get("count")
            .map_or(Some(1), |v| self.count::<u32>(v, "images.count", 1))?;
        if count > MAX_LOAD_IMAGES {
            let v = f.get("count").map_or(y.loc, |v| v.loc);
            self.error(
                Diagnostic::new(v, format!("images.count is out of range: {count}"))
                    .expected(format!("1 to {MAX_LOAD_IMAGES} images a request")),
            );
            return None;
        }
        let source = match (f.get("size"), f.get("dir")) {
            (Some(s), None) => self.generated(s)?,
            (None, Some(d)) => self.image_dir(d)?,
            _ => {
                self.error(
                    Diagnostic::new(y.loc, "give `images` one of `size` or `dir`")
                        .expected("`size: 512x512` (one-colour PNGs, another colour each request) or `dir: images/` (its image files in turn)"),
                );
                return None;
            }
        };
        if let ImageSource::Files { images, .. } = &source
            && count as usize > images.len()
        {
            let v = f.get("count").map_or(y.loc, |v| v.loc);
            self.error(
                Diagnostic::new(v, format!("images.count {count} is more than the directory's {} images", images.len()))
                    .expected("at most as many images a request as the directory holds: none sent twice in one request"),
            );
            return None;
        }
        Some(LoadImages { count, source })
    }

    /// `size: WxH`: a one-colour PNG of that size.
    fn generated(&mut self, y: &Yaml) -> Option<ImageSource> {
        let text = self.text(y, "images.size")?;
        let pixels = |s: &str| {
            s.parse::<u32>()
                .ok()
                .filter(|n| (1..=MAX_IMAGE_SIDE).contains(n))
        };
        let dims = text
            .split_once(['x', '×'])
            .and_then(|(w, h)| Some((pixels(w.trim())?, pixels(h.trim())?)));
        let Some((width, height)) = dims else {
            self.error(
                Diagnostic::new(y.loc, format!("images.size {text:?} is not a size")).expected(
                    format!("pixels across and down, each 1 to {MAX_IMAGE_SIDE}: `512x512`"),
                ),
            );
            return None;
        };
        match crate::media::flat_png(width, height) {
            Ok(png) => Some(ImageSource::Generated {
                width,
                height,
                png: png.into(),
            }),
            Err(e) => {
                self.error(Diagnostic::new(
                    y.loc,
                    format!("cannot make a {width}×{height} PNG: {e}"),
                ));
                None
            }
        }
    }

    /// `dir: PATH`: its image files (by extension), in name order, each
    /// read and checked as a probe's image is.
    fn image_dir(&mut self, y: &Yaml) -> Option<ImageSource> {
        let path = self.file(y, "images.dir")?;
        let read = read_dir(&path);
        match read {
            Ok(images) => Some(ImageSource::Files {
                path,
                images: Arc::new(images),
            }),
            Err(e) => {
                self.error(
                    Diagnostic::new(y.loc, format!("images.dir {}: {e}", path.display()))
                        .expected(format!("a directory of PNG, JPEG, GIF or WebP files (`.png`, `.jpg`, …), 1 to {MAX_DIR_IMAGES} of them")),
                );
                None
            }
        }
    }
}

/// A directory's image files in name order; an error names the first that
/// is not one, or says why there are none or too many.
fn read_dir(path: &Path) -> Result<Vec<Image>, String> {
    let mut names: Vec<std::path::PathBuf> = std::fs::read_dir(path)
        .map_err(|e| e.to_string())?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| IMAGE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
        })
        .collect();
    if names.is_empty() {
        return Err("no image files (`.png`, `.jpg`, `.jpeg`, `.gif`, `.webp`)".into());
    }
    if names.len() > MAX_DIR_IMAGES {
        return Err(format!(
            "{} image files; at most {MAX_DIR_IMAGES}",
            names.len()
        ));
    }
    names.sort();
    let mut images = Vec::with_capacity(names.len());
    let mut bytes = 0;
    for name in names {
        let shown = name.display().to_string();
        let image = image::from_file(&name, &shown)?;
        bytes += image.url.len();
        if bytes > MAX_DIR_BYTES {
            return Err(format!(
                "more than {} MiB of images",
                MAX_DIR_BYTES / (1024 * 1024)
            ));
        }
        images.push(image);
    }
    Ok(images)
}
