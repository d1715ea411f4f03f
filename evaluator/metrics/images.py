"""Image metrics: OSWorld's compare_images (vlc.py), compare_image_list and the GIMP checks (gimp.py).

Every image goes through load_image: the file is size-capped, its header is read and its pixel count
checked against MAX_IMAGE_PIXELS before any pixel is decoded, and a file PIL cannot decode is a
MetricInputError (evaluator_error), never a score.

Where OSWorld itself raises on an agent's output (images of different sizes handed to SSIM, an
all-black image divided by its brightness, a one-colour image with no "triangle"), OSWorld's run
dies on an exception; here such an output scores 0, since it is a wrong answer and not a broken
task. Each metric's `osworld` note says which of these it meets.
"""
import os

import numpy as np
from PIL import Image, ImageChops, UnidentifiedImageError

from _common import MAX_IMAGE_PIXELS, MetricInputError, check_file, metric
from _util import key, need

Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS

SSIM_NOTE = ("SSIM is skimage's structural_similarity with channel_axis=-1 on the raw arrays, as "
             "OSWorld calls it (on a 2-D grey array that makes each column a 'channel', as in "
             "OSWorld). Arrays of different shapes or under 7 pixels a side, where OSWorld's call "
             "raises, score 0.")


def load_image(path, what="result", decode=True):
    """A PIL image from a path, checked before decoding; decode=False reads only the header."""
    check_file(path, what)
    try:
        img = Image.open(path)
    except Image.DecompressionBombError:
        raise MetricInputError(f"{what}: image over the {MAX_IMAGE_PIXELS} pixel cap") from None
    except (UnidentifiedImageError, OSError, ValueError) as e:
        raise MetricInputError(f"{what}: not a readable image: {e}") from None
    w, h = img.size
    if decode:
        if w * h > MAX_IMAGE_PIXELS:
            raise MetricInputError(f"{what}: {w}x{h} image, over the {MAX_IMAGE_PIXELS} pixel cap")
        try:
            img.load()
        except (Image.DecompressionBombError, OSError, ValueError, SyntaxError) as e:
            raise MetricInputError(f"{what}: image data unreadable: {e}") from None
    return img


def ssim(a, b):
    """OSWorld's structure_check_by_ssim score, or None where OSWorld's call would raise."""
    from skimage.metrics import structural_similarity
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or min(a.shape[:2]) < 7 or a.ndim not in (2, 3):
        return None
    return float(structural_similarity(a, b, channel_axis=-1))


def ssim_at_least(a, b, threshold):
    s = ssim(a, b)
    return s is not None and s >= threshold


def pair(result, expected):
    """Both images loaded, or None when either is missing (OSWorld scores that 0)."""
    if result is None or expected is None:
        return None
    return load_image(result), load_image(expected, "expected")


@metric("compare_images", "images", options={},
        summary="SSIM of the two images in grey, both resized to the smaller size (a score in 0..1)",
        osworld="vlc.py compare_images: both converted to L, resized with LANCZOS to min(size1, size2) "
                "(Python's tuple order: the narrower one, ties by height), skimage SSIM on the 2-D arrays. "
                "Differs: a negative SSIM is reported as 0 (scores are 0..1 here); images under 7 pixels a "
                "side, where OSWorld raises, score 0. A missing image scores 0 as in OSWorld.")
def compare_images(result, expected):
    if not result or not expected:
        return 0.0
    a = load_image(result).convert("L")
    b = load_image(expected, "expected").convert("L")
    size = min(a.size, b.size)
    a = a.resize(size, Image.Resampling.LANCZOS)
    b = b.resize(size, Image.Resampling.LANCZOS)
    from skimage.metrics import structural_similarity
    if min(size) < 7:
        return 0.0
    return max(0.0, float(structural_similarity(np.asarray(a), np.asarray(b))))


@metric("compare_image_list", "images", options={},
        summary="1 when every result image is pixel-identical to its expected image",
        osworld="gimp.py compare_image_list: a path or a list of paths each side, zipped pairwise; a pair "
                "with a missing side scores 0; ImageChops.difference(...).getbbox() must be empty (for RGBA "
                "PIL looks at the alpha band only, as in OSWorld). Differs: images of different size or mode, "
                "where OSWorld raises, score 0.")
def compare_image_list(result, expected):
    if not isinstance(result, list):
        result, expected = [result], [expected]
    need(expected, list, "expected")
    for pred, gold in zip(result, expected):
        if not pred or not gold:
            return 0.0
        a, b = load_image(pred), load_image(gold, "expected")
        if a.size != b.size or a.mode != b.mode:
            return 0.0
        if ImageChops.difference(a, b).getbbox():
            return 0.0
    return 1.0


def brightness(img):
    from PIL import ImageStat
    return ImageStat.Stat(img.convert("L")).mean[0]


def normalized(img, target=128):
    """OSWorld's normalize_brightness: every band scaled so the grey mean would be `target`."""
    factor = target / brightness(img)
    return img.point(lambda x: min(255, max(0, int(x * factor))))


@metric("check_brightness_decrease_and_structure_sim", "images", options={},
        summary="1 when the result is darker than the original and the same picture once both are "
                "brought to the same brightness",
        osworld="gimp.py check_brightness_decrease_and_structure_sim: grey mean of the result < the "
                "original's, and after scaling each image's bands to a grey mean of 128 the MSE of the /255 "
                "arrays is < 0.03. Differs: an all-black image (OSWorld divides by zero) or images of "
                "different shapes (OSWorld raises in numpy) score 0.")
def check_brightness_decrease_and_structure_sim(result, expected):
    images = pair(result, expected)
    if images is None:
        return 0.0
    src, tgt = images
    if brightness(src) == 0 or brightness(tgt) == 0:
        return 0.0
    if not brightness(tgt) > brightness(src):
        return 0.0
    a = np.asarray(normalized(src), dtype=np.float32) / 255
    b = np.asarray(normalized(tgt), dtype=np.float32) / 255
    if a.shape != b.shape:
        return 0.0
    return 1.0 if float(np.mean((a - b) ** 2)) < 0.03 else 0.0


def hsv(img):
    return (img if img.mode == "RGB" else img.convert("RGB")).convert("HSV")


@metric("check_saturation_increase_and_structure_sim", "images", options={},
        summary="1 when the result is more saturated than the original and its hue and value planes "
                "are structurally the same",
        osworld="gimp.py check_saturation_increase_and_structure_sim: mean S of the result's HSV > the "
                "original's, and SSIM >= 0.9 on the H planes and on the V planes. " + SSIM_NOTE +
                " Differs: non-RGB images are converted to RGB before HSV (PIL refuses RGBA->HSV, so "
                "OSWorld raises there).")
def check_saturation_increase_and_structure_sim(result, expected):
    images = pair(result, expected)
    if images is None:
        return 0.0
    src, tgt = map(hsv, images)
    hs, ss, vs = src.split()
    ht, st, vt = tgt.split()
    if not np.mean(np.asarray(ss)) > np.mean(np.asarray(st)):
        return 0.0
    return 1.0 if ssim_at_least(hs, ht, 0.9) and ssim_at_least(vs, vt, 0.9) else 0.0


@metric("check_file_exists_and_structure_sim", "images", options={},
        summary="1 when the exported file exists and is structurally the same image as the original",
        osworld="gimp.py check_file_exists_and_structure_sim: a missing result file scores 0, else SSIM >= 0.9. "
                + SSIM_NOTE)
def check_file_exists_and_structure_sim(result, expected):
    if not isinstance(result, str) or not os.path.isfile(result):
        return 0.0
    images = pair(result, expected)
    return 1.0 if images and ssim_at_least(*images, 0.9) else 0.0


@metric("check_triangle_position", "images", expected=False, options={},
        summary="1 when the centroid of the triangle's colour is within 5% of the image centre",
        osworld="gimp.py check_triangle_position: the colours are counted and sorted by ascending count, the "
                "'triangle' colour is the second in that order (OSWorld's comment says the second most "
                "common, its code takes the second least common: reproduced), and its pixels' centroid must "
                "be within 5% of height and width of the centre. Differs: a one-colour image (OSWorld raises) "
                "scores 0; a grey image is treated as one band (OSWorld raises).")
def check_triangle_position(result):
    if result is None:
        return 0.0
    arr = np.asarray(load_image(result))
    if arr.ndim == 2:
        arr = arr[:, :, None]
    colours, counts = np.unique(arr.reshape(-1, arr.shape[2]), axis=0, return_counts=True)
    if len(colours) < 2:
        return 0.0
    triangle = colours[np.argsort(counts)][1]
    coords = np.argwhere(np.all(arr == triangle, axis=2))
    centre = np.array(arr.shape[:2]) / 2
    return 1.0 if np.all(np.abs(coords.mean(axis=0) - centre) < 0.05 * np.array(arr.shape[:2])) else 0.0


@metric("check_structure_sim", "images", options={},
        summary="1 when the two images are structurally the same (SSIM >= 0.9)",
        osworld="gimp.py check_structure_sim: SSIM >= 0.9 on the images as decoded. " + SSIM_NOTE)
def check_structure_sim(result, expected):
    images = pair(result, expected)
    return 1.0 if images and ssim_at_least(*images, 0.9) else 0.0


@metric("check_structure_sim_resized", "images", options={},
        summary="1 when the result, resized to the original's size, is structurally the same (SSIM >= 0.9)",
        osworld="gimp.py check_structure_sim_resized: result resized to the expected size (PIL's default "
                "resampling, BICUBIC, pinned here), then SSIM >= 0.9. " + SSIM_NOTE)
def check_structure_sim_resized(result, expected):
    images = pair(result, expected)
    if images is None:
        return 0.0
    src, tgt = images
    src = src.resize(tgt.size, Image.Resampling.BICUBIC)
    return 1.0 if ssim_at_least(src, tgt, 0.9) else 0.0


@metric("check_structure_sim_with_threshold", "images",
        options={"ssim_threshold": "number, default 0.85: the SSIM the pair must reach"},
        summary="1 when the two images, in RGB and at the expected image's size, reach the SSIM threshold",
        osworld="gimp.py check_structure_sim_with_threshold (newer OSWorld): result resized with LANCZOS to "
                "the expected size when they differ, both converted to RGB, SSIM over the colour axis with "
                "a 7-pixel window (the largest odd window for smaller images) >= ssim_threshold.")
def check_structure_sim_with_threshold(result, expected, ssim_threshold=0.85):
    from skimage.metrics import structural_similarity
    need(ssim_threshold, (int, float), "options.ssim_threshold")
    images = pair(result, expected)
    if images is None:
        return 0.0
    src, tgt = images[0], images[1].convert("RGB")
    if src.size != tgt.size:
        src = src.resize(tgt.size, Image.Resampling.LANCZOS)
    a, b = np.asarray(src.convert("RGB")), np.asarray(tgt)
    win = min(7, min(a.shape[:2]))
    win -= 1 - win % 2
    if win < 1:
        return 0.0
    return 1.0 if structural_similarity(a, b, win_size=win, channel_axis=2) >= ssim_threshold else 0.0


@metric("check_contrast_increase_and_structure_sim", "images", options={},
        summary="1 when the result has more contrast than the original and is structurally similar (SSIM >= 0.65)",
        osworld="gimp.py check_contrast_increase_and_structure_sim: contrast is the standard deviation of "
                "the raw array (palette indices for a P image, as in OSWorld); result's > original's and "
                "SSIM >= 0.65. " + SSIM_NOTE)
def check_contrast_increase_and_structure_sim(result, expected):
    images = pair(result, expected)
    if images is None:
        return 0.0
    src, tgt = images
    if not np.std(np.asarray(src, dtype=np.float32)) > np.std(np.asarray(tgt, dtype=np.float32)):
        return 0.0
    return 1.0 if ssim_at_least(src, tgt, 0.65) else 0.0


@metric("check_image_size", "images",
        options={},
        summary="1 when the image has the rule's width and/or height",
        osworld="gimp.py check_image_size: rules {\"width\"?, \"height\"?}, an absent or null key is not "
                "checked. Only the image header is read, so no pixel cap applies.")
def check_image_size(result, expected):
    need(expected, dict, "expected")
    if result is None:
        return 0.0
    w, h = load_image(result, decode=False).size
    ok_h = expected.get("height") is None or h == expected["height"]
    ok_w = expected.get("width") is None or w == expected["width"]
    return 1.0 if ok_h and ok_w else 0.0


@metric("check_palette_and_structure_sim", "images", options={},
        summary="1 when the result is a palette (indexed) image and, in RGB, structurally the same as the original",
        osworld="gimp.py check_palette_and_structure_sim: result mode must be P, and SSIM(result as RGB, "
                "original as decoded) >= 0.9 (an RGBA original therefore never matches: OSWorld raises, "
                "here 0). " + SSIM_NOTE)
def check_palette_and_structure_sim(result, expected):
    images = pair(result, expected)
    if images is None:
        return 0.0
    src, tgt = images
    return 1.0 if src.mode == "P" and ssim_at_least(src.convert("RGB"), tgt, 0.9) else 0.0


@metric("check_textbox_on_leftside", "images", expected=False, options={},
        summary="1 when the leftmost dark (grey < 128) pixel is in the left 5% of the image",
        osworld="gimp.py check_textbox_on_leftside: the leftmost pixel with grey < 128 over all rows must be "
                "at x < 5% of the width; an image with no dark pixel scores 0. Same result, vectorised.")
def check_textbox_on_leftside(result):
    if result is None:
        return 0.0
    img = load_image(result)
    dark = np.asarray(img.convert("L")) < 128
    cols = np.flatnonzero(dark.any(axis=0))
    left = cols[0] if len(cols) else img.size[0]
    return 1.0 if left < img.size[0] * 0.05 else 0.0


@metric("check_image_mirror", "images", options={},
        summary="1 when the result is the original flipped left-right (SSIM >= 0.99)",
        osworld="gimp.py check_image_mirror: SSIM(result flipped left-right, original) >= 0.99. " + SSIM_NOTE)
def check_image_mirror(result, expected):
    images = pair(result, expected)
    if images is None:
        return 0.0
    src, tgt = images
    return 1.0 if ssim_at_least(src.transpose(Image.Transpose.FLIP_LEFT_RIGHT), tgt, 0.99) else 0.0


@metric("check_green_background", "images", options={},
        summary="1 when every pixel that is not black in the original is green (G > R and G > B) in the result",
        osworld="gimp.py check_green_background: for every non-black (RGB != 0,0,0) pixel of the original, "
                "the result's pixel must have G > R and G > B. Differs: OSWorld indexes the arrays as "
                "[x, y] (transposed), which is the same for square images but raises or checks only a "
                "part of non-square ones; here all pixels are checked. Both images are read as RGB "
                "(OSWorld raises on grey or palette images). Images of different sizes score 0.")
def check_green_background(result, expected):
    images = pair(result, expected)
    if images is None:
        return 0.0
    src, tgt = (np.asarray(img.convert("RGB")).astype(np.int16) for img in images)
    if src.shape != tgt.shape:
        return 0.0
    background = tgt.any(axis=2)
    r, g, b = src[..., 0], src[..., 1], src[..., 2]
    green = (g > r) & (g > b)
    return 1.0 if bool(np.all(green[background])) else 0.0


def sharpness(img):
    """OpenCV's Laplacian variance: grey image, 4-neighbour Laplacian, borders reflected (101)."""
    from scipy.ndimage import convolve
    grey = np.asarray(img.convert("L"), dtype=np.float64)
    return float(np.var(convolve(grey, np.array([[0, 1, 0], [1, -4, 1], [0, 1, 0]], float), mode="mirror")))


@metric("check_sharper", "images", options={},
        summary="1 when the result is sharper (higher Laplacian variance) than the original",
        osworld="gimp.py check_sharper: variance of cv2.Laplacian (CV_64F, 3x3 four-neighbour kernel, "
                "BORDER_REFLECT_101) of the grey image, result's > original's. Computed with scipy "
                "(mode \"mirror\" is OpenCV's reflect-101) on PIL's grey conversion (the same ITU-R 601 "
                "weights as OpenCV's). A missing image scores 0 (OpenCV would raise).")
def check_sharper(result, expected):
    images = pair(result, expected)
    if images is None:
        return 0.0
    return 1.0 if sharpness(images[0]) > sharpness(images[1]) else 0.0


@metric("check_image_file_size", "images",
        options={},
        summary="1 when the file is smaller than rules.max_size bytes",
        osworld="gimp.py check_image_file_size: os.path.getsize(result) < rules[\"max_size\"].")
def check_image_file_size(result, expected):
    limit = need(key(expected, "max_size"), (int, float), "expected.max_size")
    if result is None:
        return 0.0
    if not isinstance(result, str):
        raise MetricInputError(f"result: expected a file path, got {type(result).__name__}")
    try:
        size = os.stat(result).st_size
    except OSError as e:
        raise MetricInputError(f"result: {e.strerror}: {os.path.basename(result)}") from None
    return 1.0 if size < limit else 0.0
