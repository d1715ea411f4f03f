"""getter_run.py: the getters that read a guest document in the evaluator sandbox (a slide's audio or
background image in a pptx, an xlsx's last row), on packages written by pptx_fixture and openpyxl.
Run as envmgr runs it (stdin request, one JSON line out), without the sandbox."""
import base64
import json
import os
import subprocess

from metric_testlib import PYTHON, ROOT, MetricCase
from pptx_fixture import para, run, solid_bg, sp, write_pptx

GETTER_RUN = os.path.join(ROOT, "evaluator", "metrics", "getter_run.py")
BLIP_BG = ('<p:bg><p:bgPr><a:blipFill><a:blip r:embed="rIdImg0"/><a:stretch><a:fillRect/></a:stretch></a:blipFill>'
           '<a:effectLst/></p:bgPr></p:bg>')


def get(name, path, options):
    p = subprocess.run([PYTHON, "-I", GETTER_RUN], capture_output=True, timeout=120,
                       input=json.dumps({"getter": name, "file": path, "options": options}).encode())
    ans = json.loads(p.stdout.decode().strip().splitlines()[-1])
    assert p.returncode == (3 if "error" in ans else 0), (p.returncode, ans)
    return ans


def slide(text="Intro"):
    return [sp(2, [para(run(text))], ph='type="title"')]


class AudioInSlide(MetricCase):
    def test_embedded_linked_and_none(self):
        mp3 = b"ID3\x03fake mp3 bytes"
        deck = write_pptx(self.path("d.pptx"), [slide(), slide("two"), slide("three")], media={"media1.mp3": mp3},
                          extra_rels={0: [("rId7", "audio", "../media/media1.mp3"),
                                          ("rId8", "media", "../media/media1.mp3")],
                                      1: [("rId7", "audio", "file:///home/user/Desktop/My%20Song.mp3")]})
        a = get("audio_in_slide", deck, {"slide_index": 0})
        self.assertEqual(a["member"], "ppt/media/media1.mp3")
        self.assertEqual(base64.b64decode(a["data"]), mp3)
        self.assertEqual(get("audio_in_slide", deck, {"slide_index": 1}), {"external": "/home/user/Desktop/My Song.mp3"})
        self.assertEqual(get("audio_in_slide", deck, {"slide_index": 2}), {"found": False})
        self.assertEqual(get("audio_in_slide", deck, {"slide_index": 9}), {"found": False})   # no such slide

    def test_bad_input(self):
        self.assertIn("not a zip container", get("audio_in_slide", self.write("x.pptx", "plain text"),
                                                 {"slide_index": 0})["error"])
        deck = write_pptx(self.path("d.pptx"), [slide()], extra_rels={0: [("rId7", "audio", "../media/gone.mp3")]})
        self.assertIn("'ppt/media/gone.mp3' is not in the package", get("audio_in_slide", deck, {"slide_index": 0})["error"])
        deck = write_pptx(self.path("w.pptx"), [slide()], extra_rels={0: [("rId7", "audio", "https://e.com/a.mp3")]})
        self.assertIn("not a guest file", get("audio_in_slide", deck, {"slide_index": 0})["error"])
        self.assertIn("slide_index: expected an integer", get("audio_in_slide", deck, {"slide_index": -1})["error"])


class BackgroundImage(MetricCase):
    def test_picture_fill_colour_fill_and_none(self):
        png = b"\x89PNG\r\n\x1a\nfake"
        deck = write_pptx(self.path("d.pptx"), [slide(), [("bg", BLIP_BG)] + slide("two"),
                                                [("bg", solid_bg("FF0000"))] + slide("three")],
                          images={"image1.png": png})
        self.assertEqual(get("background_image_in_slide", deck, {"slide_index": 0}), {"found": False})
        b = get("background_image_in_slide", deck, {"slide_index": 1})
        self.assertEqual((b["member"], base64.b64decode(b["data"])), ("ppt/media/image1.png", png))
        self.assertEqual(get("background_image_in_slide", deck, {"slide_index": 2}), {"found": False})
        self.assertEqual(get("background_image_in_slide", deck, {"slide_index": 5}), {"found": False})


class ContentFromVmFile(MetricCase):
    def test_last_row_as_str(self):
        from openpyxl import Workbook
        wb = Workbook()
        ws = wb.active
        for r in (["Name", "Citations", "h-index", "Note"], ["Ada", 10, 1.5, "x"], ["Yann LeCun", 345074, 147, None]):
            ws.append(r)
        wb.save(self.path("r.xlsx"))
        self.assertEqual(get("content_from_vm_file", self.path("r.xlsx"), {"file_type": "xlsx", "file_content": "last_row"}),
                         {"value": ["Yann LeCun", "345074", "147.0", "nan"]})
        wb = Workbook()
        wb.active.append(["only a header"])
        wb.save(self.path("e.xlsx"))
        self.assertIn("no rows", get("content_from_vm_file", self.path("e.xlsx"),
                                     {"file_type": "xlsx", "file_content": "last_row"})["error"])
        self.assertIn("only file_type xlsx", get("content_from_vm_file", self.path("r.xlsx"),
                                                 {"file_type": "csv", "file_content": "last_row"})["error"])
