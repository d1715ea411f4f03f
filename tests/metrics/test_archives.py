"""archives.py: compare_archive (zip and tar.gz, pdf and text members, a sub-folder) and
compare_zip_files, on archives written here."""
import io
import tarfile
import zipfile

from metric_testlib import MetricCase
from pdf_fixture import text_pdf


class Archives(MetricCase):
    def zip(self, name, members):
        p = self.path(name)
        with zipfile.ZipFile(p, "w") as z:
            for n, data in members.items():
                z.writestr(n, data)
        return p

    def targz(self, name, members):
        p = self.path(name)
        with tarfile.open(p, "w:gz") as t:
            for n, data in members.items():
                info = tarfile.TarInfo(n)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
        return p

    def test_pdf_archives_in_a_folder(self):
        gold = {"lecture_slides/l1.pdf": text_pdf(["Lecture 1"]), "lecture_slides/l2.pdf": text_pdf(["Lecture 2"])}
        e = self.zip("gold.zip", gold)
        opts = {"file_path": "lecture_slides", "file_type": "pdf"}
        self.assertScore(1.0, "compare_archive", self.zip("r.zip", gold), e, opts)
        self.assertScore(0.0, "compare_archive", self.zip("r2.zip", {"lecture_slides/l1.pdf": text_pdf(["Lecture 1"])}), e, opts)
        self.assertScore(0.0, "compare_archive", self.zip("r3.zip", {"other/l1.pdf": text_pdf(["x"])}), e, opts)

    def test_tar_gz_and_text(self):
        e = self.targz("gold.tar.gz", {"a.txt": b"alpha\n", "b.txt": b"beta\n"})
        self.assertScore(1.0, "compare_archive", self.targz("r.tar.gz", {"a.txt": b"alpha\n", "b.txt": b"beta\n"}), e)
        self.assertScore(0.5, "compare_archive", self.targz("r2.tar.gz", {"a.txt": b"alpha\n", "b.txt": b"BETA\n"}), e)
        self.assertScore(1.0, "compare_archive", self.targz("r3.tar.gz", {"a.txt": b"ALPHA\n", "b.txt": b"BETA\n"}), e,
                         {"ignore_case": True})

    def test_unsafe_and_damaged(self):
        e = self.zip("gold.zip", {"a.txt": b"x"})
        self.assertError("compare_archive", self.zip("r.zip", {"../escape.txt": b"x"}), e)
        self.assertError("compare_archive", self.write("r2.zip", b"neither zip nor tar"), e)
        self.assertError("compare_archive", self.zip("r3.zip", {"a.txt": b"x"}), e, {"file_type": "spreadsheet"})
        self.assertScore(0.0, "compare_archive", self.path("absent.zip"), e)

    def test_compare_zip_files(self):
        members = {"report.pdf": text_pdf(["Recruitment and retention"]), "data.csv": b"a,b\n1,2\n"}
        e = self.zip("gold.zip", members)
        self.assertScore(1.0, "compare_zip_files", self.zip("r.zip", members), e)
        self.assertScore(0.0, "compare_zip_files", self.zip("r2.zip", dict(members, **{"data.csv": b"a,b\n1,3\n"})), e)
        self.assertScore(0.0, "compare_zip_files", self.zip("r3.zip", dict(members, **{"report.pdf": text_pdf(["Something else entirely"])})), e)
        self.assertError("compare_zip_files", self.write("bad.zip", b"PK\x05\x06broken"), e)
