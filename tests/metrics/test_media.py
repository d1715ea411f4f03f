"""media.py: audio written with numpy + wave / soundfile, video encoded with PyAV, ID3 tags written
with mutagen; a 1-case, a 0-case and a malformed input per metric."""
import wave

import numpy as np

from metric_testlib import MetricCase, run_metric

RATE = 22050


def tone(freqs, seconds=2.0, rate=RATE):
    """A melody: equal-length notes of the given frequencies, with a little harmonic colour."""
    n = int(seconds * rate / len(freqs))
    t = np.arange(n) / rate
    return np.concatenate([0.4 * np.sin(2 * np.pi * f * t) + 0.1 * np.sin(2 * np.pi * 3 * f * t) for f in freqs])


def write_wav(path, samples, rate=RATE):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes((np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes())
    return path


def write_video(path, frames, rate=10):
    import av
    with av.open(path, "w") as c:
        s = c.add_stream("mpeg4", rate=rate)
        s.width, s.height, s.pix_fmt = frames[0].shape[1], frames[0].shape[0], "yuv420p"
        s.bit_rate, s.codec_context.bit_rate_tolerance = 2_000_000, 4_000_000
        for img in frames:
            for p in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


def moving_bar(n, colour=(255, 255, 255), seed=None):
    frames = []
    rng = np.random.default_rng(seed) if seed is not None else None
    for i in range(n):
        img = np.zeros((64, 96, 3), np.uint8)
        if rng is None:
            img[:, (i * 4) % 80:(i * 4) % 80 + 16] = colour
            img[20:40, 10:30] = (200, 50, 50)
        else:
            img = rng.integers(0, 255, (64, 96, 3), dtype=np.uint8)
        frames.append(img)
    return frames


class MediaTest(MetricCase):
    def score(self, name, result, expected=None, options=None):
        kind, val = run_metric(name, result, expected, options)
        self.assertEqual(kind, "score", val)
        return val

    def test_compare_audios(self):
        name = "compare_audios"
        melody = tone([440, 494, 523, 587, 659, 698, 784, 880])
        gold = write_wav(self.path("gold.wav"), melody)
        self.assertScore(1.0, name, write_wav(self.path("same.wav"), melody), gold)
        # the same melody as 44.1 kHz MP3 (resampled and lossy) stays very close
        import soundfile
        mp3 = self.path("same.mp3")
        soundfile.write(mp3, tone([440, 494, 523, 587, 659, 698, 784, 880], rate=44100), 44100, format="MP3")
        close = self.score(name, mp3, gold)
        other = self.score(name, write_wav(self.path("other.wav"),
                                           np.random.default_rng(3).normal(0, 0.3, 2 * RATE)), gold)
        self.assertGreater(close, 0.02)
        self.assertGreater(close, 5 * other)
        self.assertLess(other, 0.01)
        self.assertScore(0.0, name, None, gold)
        self.assertError(name, self.write("junk.wav", b"RIFF not really a wave file"), gold)

    def test_compare_videos(self):
        name = "compare_videos"
        gold = write_video(self.path("gold.mp4"), moving_bar(30))
        self.assertScore(1.0, name, write_video(self.path("same.mp4"), moving_bar(30)), gold)
        self.assertScore(0.0, name, write_video(self.path("short.mp4"), moving_bar(20)), gold)
        self.assertScore(0.0, name, write_video(self.path("noise.mp4"), moving_bar(30, seed=1)), gold)
        self.assertScore(1.0, name, write_video(self.path("short2.mp4"), moving_bar(20)), gold,
                         {"max_frames_to_check": 10, "threshold": 5})
        self.assertError(name, self.write("junk.mp4", b"\x00\x00\x00\x18ftypmp42 garbage"), gold)

    def tagged_mp3(self, name, **tags):
        import soundfile
        from mutagen.mp3 import EasyMP3
        p = self.path(name)
        soundfile.write(p, tone([440]), RATE, format="MP3")
        if tags:
            m = EasyMP3(p)
            m.add_tags()
            for k, v in tags.items():
                m[k] = v
            m.save()
        return p

    def test_check_mp3_meta(self):
        name = "check_mp3_meta"
        rules = {"title": {"method": "eq", "ref": "Missing You"}, "artist": {"method": "eq", "ref": "Cheng Xiang"}}
        self.assertScore(1.0, name, self.tagged_mp3("a.mp3", title="Missing You", artist="Cheng Xiang"), rules)
        self.assertScore(0.0, name, self.tagged_mp3("b.mp3", title="Missing You", artist="Zhou Xuan"), rules)
        self.assertScore(0.0, name, self.tagged_mp3("c.mp3"), rules)
        self.assertScore(0.0, name, None, rules)
        self.assertError(name, self.write("junk.mp3", b"this is no mpeg audio" * 10), rules)
        self.assertError(name, self.tagged_mp3("d.mp3", title="x"), {"title": "Missing You"})
