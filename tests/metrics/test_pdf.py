"""pdf.py: compare_pdfs, compare_pdf_images, check_pdf_pages on PDFs written here (by hand, and
by PIL for an image saved as a PDF, as in OSWorld's receipt task)."""
from PIL import Image

from metric_testlib import MetricCase, run_metric
from pdf_fixture import text_pdf


class Pdfs(MetricCase):
    def pdf(self, name, pages):
        return self.write(name, text_pdf(pages))

    def image_pdf(self, name, color):
        p = self.path(name)
        Image.new("RGB", (60, 40), color).save(p)
        return p

    def test_compare_pdfs(self):
        e = self.pdf("e.pdf", ["Invoice 243729", "Total 100"])
        self.assertScore(1.0, "compare_pdfs", self.pdf("r.pdf", ["Invoice 243729", "Total 100"]), e)
        kind, val = run_metric("compare_pdfs", self.pdf("r2.pdf", ["Invoice 243729", "Total 999"]), e)
        self.assertEqual(kind, "score")
        self.assertTrue(0.5 < val < 1.0, val)
        self.assertScore(0.0, "compare_pdfs", self.path("absent.pdf"), e)
        self.assertError("compare_pdfs", self.write("bad.pdf", b"%PDF-1.4 garbage"), e)

    def test_compare_pdfs_lists(self):
        e = [self.pdf("e1.pdf", ["Linda Green"]), self.pdf("e2.pdf", ["Sophia Carter"])]
        r = [self.pdf("r1.pdf", ["Linda Green"]), None]
        self.assertScore(0.5, "compare_pdfs", r, e)

    def test_compare_pdf_images(self):
        e = self.image_pdf("e.pdf", "red")
        self.assertScore(1.0, "compare_pdf_images", self.image_pdf("r.pdf", "red"), e)
        self.assertScore(0.0, "compare_pdf_images", self.image_pdf("r2.pdf", "blue"), e)
        self.assertScore(0.0, "compare_pdf_images", self.pdf("r3.pdf", ["text only"]), e)
        self.assertError("compare_pdf_images", self.write("bad.pdf", b"not a pdf"), e)

    def test_check_pdf_pages(self):
        rule = {"relation": "eq", "ref_value": 1}
        self.assertScore(1.0, "check_pdf_pages", self.pdf("one.pdf", ["fits"]), rule)
        self.assertScore(0.0, "check_pdf_pages", self.pdf("two.pdf", ["a", "b"]), rule)
        self.assertError("check_pdf_pages", self.write("bad.pdf", b"%PDF-"), rule)
        self.assertError("check_pdf_pages", self.pdf("one2.pdf", ["x"]), {"relation": "about", "ref_value": 1})
