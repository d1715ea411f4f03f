"""images.py: every metric on pictures PIL draws here (a 1-case, a 0-case, a malformed input)."""
import struct
import zlib

import numpy as np
from PIL import Image, ImageDraw, ImageEnhance

from metric_testlib import MetricCase


def scene(w=96, h=72, bg=(200, 180, 120)):
    """A picture with structure: a gradient, a rectangle, an ellipse and a line."""
    x = np.linspace(0, 1, w)[None, :, None]
    y = np.linspace(0, 1, h)[:, None, None]
    base = np.clip(np.array(bg) * (0.6 + 0.4 * x) * (0.7 + 0.3 * y), 0, 255).astype(np.uint8)
    img = Image.fromarray(base, "RGB")
    d = ImageDraw.Draw(img)
    d.rectangle([w // 8, h // 6, w // 2, h // 2], fill=(40, 90, 200))
    d.ellipse([w // 2, h // 3, w - 8, h - 6], fill=(220, 60, 50))
    d.line([0, h - 1, w - 1, 0], fill=(10, 10, 10), width=3)
    return img


def huge_png_header(w, h):
    """A PNG whose IHDR claims w x h pixels (no real pixel data needed to test the cap)."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


class ImagesTest(MetricCase):
    def save(self, name, img, **kw):
        p = self.path(name)
        img.save(p, **kw)
        return p

    def setUp(self):
        super().setUp()
        self.orig = self.save("orig.png", scene())
        self.other = self.save("other.png", scene(bg=(30, 160, 60)).rotate(180))
        self.junk = self.write("junk.png", b"this is not an image")
        self.huge = self.write("huge.png", huge_png_header(30000, 30000))

    # compare_images: SSIM in grey after resizing to the smaller size
    def test_compare_images(self):
        big = self.save("big.png", scene().resize((192, 144), Image.Resampling.LANCZOS))
        self.assertScore(1.0, "compare_images", self.orig, self.orig)
        kind_ok = self.run_score("compare_images", big, self.orig)
        self.assertGreater(kind_ok, 0.9)
        self.assertLess(self.run_score("compare_images", self.other, self.orig), 0.9)
        noise = self.save("noise.png", Image.fromarray(np.random.default_rng(1).integers(0, 255, (72, 96), dtype=np.uint8)))
        self.assertLess(self.run_score("compare_images", noise, self.orig), 0.1)
        self.assertScore(0.0, "compare_images", None, self.orig)
        self.assertError("compare_images", self.junk, self.orig)

    def test_huge_image_refused_fast(self):
        msg = self.assertError("compare_images", self.huge, self.orig)
        self.assertIn("pixel cap", msg)

    def run_score(self, name, result, expected=None, options=None):
        from metric_testlib import run_metric
        kind, val = run_metric(name, result, expected, options)
        self.assertEqual(kind, "score", val)
        return val

    def test_compare_image_list(self):
        copy = self.save("copy.png", scene())
        self.assertScore(1.0, "compare_image_list", [copy, self.orig], [self.orig, copy])
        self.assertScore(1.0, "compare_image_list", copy, self.orig)
        px = scene()
        px.putpixel((3, 3), (0, 0, 0))
        self.assertScore(0.0, "compare_image_list", [copy, self.save("px.png", px)], [self.orig, self.orig])
        self.assertScore(0.0, "compare_image_list", [None], [self.orig])
        self.assertError("compare_image_list", [self.junk], [self.orig])
        self.assertError("compare_image_list", [self.orig], self.orig)

    def test_check_brightness_decrease_and_structure_sim(self):
        darker = self.save("dark.png", ImageEnhance.Brightness(scene()).enhance(0.6))
        brighter = self.save("bright.png", ImageEnhance.Brightness(scene()).enhance(1.3))
        name = "check_brightness_decrease_and_structure_sim"
        self.assertScore(1.0, name, darker, self.orig)
        self.assertScore(0.0, name, brighter, self.orig)
        darker_other = self.save("dark_other.png", ImageEnhance.Brightness(Image.open(self.other)).enhance(0.3))
        self.assertScore(0.0, name, darker_other, self.orig)
        self.assertError(name, self.junk, self.orig)

    def test_check_saturation_increase_and_structure_sim(self):
        name = "check_saturation_increase_and_structure_sim"
        more = self.save("sat.png", ImageEnhance.Color(scene()).enhance(1.6))
        less = self.save("desat.png", ImageEnhance.Color(scene()).enhance(0.5))
        self.assertScore(1.0, name, more, self.orig)
        self.assertScore(0.0, name, less, self.orig)
        self.assertError(name, self.orig, self.junk)

    def test_check_file_exists_and_structure_sim(self):
        name = "check_file_exists_and_structure_sim"
        jpg = self.save("export.jpg", scene(), quality=95)
        self.assertScore(1.0, name, jpg, self.orig)
        self.assertScore(0.0, name, self.path("absent.jpg"), self.orig)
        self.assertScore(0.0, name, self.other, self.orig)
        self.assertError(name, self.junk, self.orig)

    def test_check_triangle_position(self):
        name = "check_triangle_position"

        def triangle(cx, cy):
            img = Image.new("RGB", (100, 80), (255, 255, 255))
            d = ImageDraw.Draw(img)
            d.polygon([(cx - 15, cy + 12), (cx + 15, cy + 12), (cx, cy - 13)], fill=(250, 220, 0))
            # a third colour, commoner than the triangle, as the "second least common" rule needs
            d.rectangle([0, 0, 99, 9], fill=(0, 0, 255))
            d.rectangle([0, 0, 0, 0], fill=(1, 2, 3))
            return img
        # OSWorld picks the second least common colour: a one-pixel mark is least common, the
        # triangle second, the bar and the background above it.
        self.assertScore(1.0, name, self.save("mid.png", triangle(50, 36)))
        self.assertScore(0.0, name, self.save("corner.png", triangle(20, 60)))
        self.assertError(name, self.junk)

    def test_check_structure_sim(self):
        name = "check_structure_sim"
        self.assertScore(1.0, name, self.save("same.png", scene()), self.orig)
        self.assertScore(0.0, name, self.other, self.orig)
        self.assertScore(0.0, name, self.save("small.png", scene(48, 36)), self.orig)
        self.assertScore(0.0, name, None, self.orig)
        self.assertError(name, self.orig, self.junk)
        self.assertError(name, self.huge, self.orig)

    def test_check_structure_sim_resized(self):
        name = "check_structure_sim_resized"
        small = self.save("small.png", scene().resize((48, 36), Image.Resampling.LANCZOS))
        big = self.save("big.png", scene().resize((192, 144), Image.Resampling.LANCZOS))
        self.assertScore(1.0, name, big, self.orig)
        self.assertScore(0.0, name, self.save("oth.png", Image.open(self.other).resize((48, 36))), self.orig)
        self.assertError(name, small, self.junk)

    def test_check_structure_sim_with_threshold(self):
        name = "check_structure_sim_with_threshold"
        opts = {"ssim_threshold": 0.85}
        rgba = scene().convert("RGBA")
        self.assertScore(1.0, name, self.save("rgba.png", rgba), self.orig, opts)
        self.assertScore(0.0, name, self.other, self.orig, opts)
        self.assertScore(0.0, name, self.orig, self.save("b.png", ImageEnhance.Contrast(scene()).enhance(0.2)),
                         {"ssim_threshold": 0.99})
        self.assertError(name, self.junk, self.orig, opts)
        self.assertError(name, self.orig, self.orig, {"ssim_threshold": "high"})

    def test_check_contrast_increase_and_structure_sim(self):
        name = "check_contrast_increase_and_structure_sim"
        more = self.save("c.png", ImageEnhance.Contrast(scene()).enhance(1.4))
        less = self.save("l.png", ImageEnhance.Contrast(scene()).enhance(0.6))
        self.assertScore(1.0, name, more, self.orig)
        self.assertScore(0.0, name, less, self.orig)
        self.assertError(name, self.junk, self.orig)

    def test_check_image_size(self):
        name = "check_image_size"
        self.assertScore(1.0, name, self.orig, {"height": 72})
        self.assertScore(1.0, name, self.orig, {"height": 72, "width": 96})
        self.assertScore(0.0, name, self.orig, {"height": 128, "width": 128})
        self.assertScore(0.0, name, None, {"height": 72})
        self.assertError(name, self.junk, {"height": 72})
        self.assertError(name, self.orig, ["height", 72])

    def test_check_palette_and_structure_sim(self):
        name = "check_palette_and_structure_sim"
        pal = self.save("pal.png", scene().quantize(colors=256))
        self.assertScore(1.0, name, pal, self.orig)
        self.assertScore(0.0, name, self.orig, self.orig)      # not a palette image
        self.assertScore(0.0, name, self.save("pal_other.png", Image.open(self.other).quantize(64)), self.orig)
        self.assertError(name, self.junk, self.orig)

    def test_check_textbox_on_leftside(self):
        name = "check_textbox_on_leftside"

        def text_at(x):
            img = Image.new("RGB", (200, 60), "white")
            ImageDraw.Draw(img).text((x, 20), "Hello GIMP", fill="black")
            return img
        self.assertScore(1.0, name, self.save("left.png", text_at(3)))
        self.assertScore(0.0, name, self.save("right.png", text_at(120)))
        self.assertScore(0.0, name, self.save("blank.png", Image.new("RGB", (50, 50), "white")))
        self.assertError(name, self.junk)

    def test_check_image_mirror(self):
        name = "check_image_mirror"
        mirrored = self.save("mirror.png", scene().transpose(Image.Transpose.FLIP_LEFT_RIGHT))
        self.assertScore(1.0, name, mirrored, self.orig)
        self.assertScore(0.0, name, self.orig, self.orig)
        self.assertError(name, mirrored, self.junk)

    def test_check_green_background(self):
        name = "check_green_background"

        def obj(bg):
            img = Image.new("RGB", (80, 60), bg)
            ImageDraw.Draw(img).ellipse([20, 15, 60, 45], fill=(0, 0, 0))
            return img
        white = self.save("white.png", obj((255, 255, 255)))
        self.assertScore(1.0, name, self.save("green.png", obj((30, 200, 40))), white)
        self.assertScore(0.0, name, self.save("blue.png", obj((30, 40, 200))), white)
        self.assertError(name, self.junk, white)

    def test_check_sharper(self):
        from PIL import ImageFilter
        name = "check_sharper"
        sharp = self.save("sharp.png", scene().filter(ImageFilter.SHARPEN))
        blurred = self.save("blur.png", scene().filter(ImageFilter.GaussianBlur(2)))
        self.assertScore(1.0, name, sharp, self.orig)
        self.assertScore(0.0, name, blurred, self.orig)
        self.assertError(name, self.junk, self.orig)

    def test_check_image_file_size(self):
        name = "check_image_file_size"
        jpg = self.save("compressed.jpeg", scene(), quality=50)
        self.assertScore(1.0, name, jpg, {"max_size": 600000})
        self.assertScore(0.0, name, jpg, {"max_size": 100})
        self.assertError(name, jpg, {"max_bytes": 600000})
        self.assertError(name, self.path("absent.jpeg"), {"max_size": 600000})
