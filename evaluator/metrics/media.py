"""Media metrics: OSWorld's compare_audios and compare_videos (vlc.py) and check_mp3_meta (others.py).

OSWorld's audio comparison uses librosa and fastdtw, its video comparison OpenCV and imagehash; Debian
packages none of librosa, fastdtw or imagehash. The same measures are computed here with numpy/scipy
(MFCCs as librosa defines them, FastDTW as Salvador & Chan define it, imagehash's pHash), decoding
with python3-soundfile (libsndfile: WAV, FLAC, OGG, MP3) and python3-av (FFmpeg) for video.
"""
import math

import numpy as np

from _common import MAX_IMAGE_PIXELS, MetricInputError, check_file, metric
from _util import match_rule, need

SAMPLE_RATE = 22050          # librosa.load's default target rate
N_FFT, HOP, N_MELS, N_MFCC = 2048, 512, 128, 20
MAX_AUDIO_SECONDS = 3 * 3600
MAX_VIDEO_FRAMES = 100_000


# ---- audio ----

def load_audio(path, what):
    """Mono float32 samples at SAMPLE_RATE, as librosa.load(path) returns them."""
    import soundfile
    from scipy.signal import resample_poly
    check_file(path, what)
    try:
        with soundfile.SoundFile(path) as f:
            if f.frames > MAX_AUDIO_SECONDS * f.samplerate:
                raise MetricInputError(f"{what}: over {MAX_AUDIO_SECONDS} s of audio")
            rate = f.samplerate
            data = f.read(dtype="float32", always_2d=True)
    except (soundfile.LibsndfileError, RuntimeError, TypeError) as e:
        raise MetricInputError(f"{what}: not a readable audio file: {e}") from None
    y = data.mean(axis=1)
    if rate != SAMPLE_RATE:
        g = math.gcd(rate, SAMPLE_RATE)
        y = resample_poly(y, SAMPLE_RATE // g, rate // g).astype(np.float32)
    return y


def hz_to_mel(f):
    """Slaney's mel scale (librosa's default, htk=False): linear to 1 kHz, logarithmic above."""
    f = np.asanyarray(f, dtype=np.float64)
    lin = f / (200.0 / 3)
    return np.where(f >= 1000.0, 15.0 + np.log(np.maximum(f, 1e-10) / 1000.0) / (np.log(6.4) / 27.0), lin)


def mel_to_hz(m):
    m = np.asanyarray(m, dtype=np.float64)
    return np.where(m >= 15.0, 1000.0 * np.exp((np.log(6.4) / 27.0) * (m - 15.0)), (200.0 / 3) * m)


def mel_filters(sr=SAMPLE_RATE, n_fft=N_FFT, n_mels=N_MELS):
    """Triangular mel filters with Slaney area normalisation (librosa.filters.mel defaults)."""
    freqs = np.fft.rfftfreq(n_fft, 1.0 / sr)
    edges = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(sr / 2.0), n_mels + 2))
    widths = np.diff(edges)
    ramps = edges[:, None] - freqs[None, :]
    lower = -ramps[:-2] / widths[:-1, None]
    upper = ramps[2:] / widths[1:, None]
    weights = np.maximum(0, np.minimum(lower, upper))
    return weights * (2.0 / (edges[2:] - edges[:-2]))[:, None]


def mfcc(y):
    """librosa.feature.mfcc(y, sr=22050) with its defaults: centred zero-padded periodic-Hann STFT
    (2048/512), power mel spectrogram (128 bands), power_to_db(ref=1, amin=1e-10, top_db=80),
    orthonormal DCT-II, 20 coefficients. Shape (20, frames)."""
    from scipy.fft import dct, rfft
    from scipy.signal import get_window
    y = np.pad(y.astype(np.float64), N_FFT // 2)
    if len(y) < N_FFT:
        y = np.pad(y, (0, N_FFT - len(y)))
    frames = np.lib.stride_tricks.sliding_window_view(y, N_FFT)[::HOP]
    power = np.abs(rfft(frames * get_window("hann", N_FFT, fftbins=True), axis=1)) ** 2
    mel = mel_filters() @ power.T
    db = 10.0 * np.log10(np.maximum(mel, 1e-10))
    db = np.maximum(db, db.max() - 80.0)
    return dct(db, axis=0, type=2, norm="ortho")[:N_MFCC]


def normalize_rows(m):
    """librosa.util.normalize(m, axis=1): each row divided by its largest magnitude (rows of ~0 kept)."""
    peak = np.abs(m).max(axis=1, keepdims=True)
    return np.where(peak > np.finfo(m.dtype).tiny, m / np.where(peak > 0, peak, 1), m)


def cosine_distances(x, y, cells):
    """scipy's cosine distance 1 - u.v/(|u||v|) for the (i, j) pairs of cells."""
    i, j = cells[:, 0], cells[:, 1]
    num = np.einsum("ij,ij->i", x[i], y[j])
    den = np.linalg.norm(x[i], axis=1) * np.linalg.norm(y[j], axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.clip(1.0 - num / den, 0.0, 2.0)


def dtw_in(x, y, cells):
    """DTW restricted to cells (sorted by i then j) with OSWorld's fastdtw step order (up, left,
    diagonal; the first minimum wins). Returns (distance, path)."""
    cost = {(0, 0): (0.0, 0, 0)}
    inf = (math.inf, -1, -1)
    for (i, j), d in zip(cells.tolist(), cosine_distances(x, y, cells).tolist()):
        i, j = i + 1, j + 1
        best = min((cost.get((i - 1, j), inf)[0] + d, i - 1, j), (cost.get((i, j - 1), inf)[0] + d, i, j - 1),
                   (cost.get((i - 1, j - 1), inf)[0] + d, i - 1, j - 1), key=lambda c: c[0])
        cost[i, j] = best
    i, j = len(x), len(y)
    path = []
    while (i, j) != (0, 0):
        path.append((i - 1, j - 1))
        i, j = cost[i, j][1], cost[i, j][2]
    path.reverse()
    return cost[len(x), len(y)][0], path


def fastdtw(x, y, radius=1):
    """FastDTW (Salvador & Chan 2007): solve at half resolution, project the path back, widen it by
    `radius`, and run DTW inside that window. Distance and path as the fastdtw package returns them."""
    if len(x) < radius + 2 or len(y) < radius + 2:
        cells = np.array([(i, j) for i in range(len(x)) for j in range(len(y))], dtype=np.int64)
        return dtw_in(x, y, cells)

    def halve(s):
        n = len(s) - len(s) % 2
        return (s[0:n:2] + s[1:n:2]) / 2
    _, coarse = fastdtw(halve(x), halve(y), radius)
    near = {(i + a, j + b) for i, j in coarse for a in range(-radius, radius + 1) for b in range(-radius, radius + 1)}
    fine = {(2 * i + a, 2 * j + b) for i, j in near for a in (0, 1) for b in (0, 1)}
    cells, start = [], 0
    for i in range(len(x)):
        first = None
        for j in range(start, len(y)):
            if (i, j) in fine:
                cells.append((i, j))
                first = j if first is None else first
            elif first is not None:
                break
        start = first if first is not None else start
    return dtw_in(x, y, np.array(cells, dtype=np.int64).reshape(-1, 2))


@metric("compare_audios", "media",
        summary="1 / (1 + FastDTW distance) between the two recordings' normalised MFCC sequences (0..1)",
        osworld="vlc.py compare_audios: librosa.load (mono, 22050 Hz), 20 MFCCs, each coefficient row scaled "
                "to peak 1, FastDTW (radius 1) with cosine distance, score 1/(1+distance). Same measure, "
                "computed with numpy/scipy since Debian lacks librosa and fastdtw. Differs: resampling to "
                "22050 Hz is scipy's polyphase filter, not librosa's soxr, and decoding is libsndfile's "
                "(WAV/FLAC/OGG/MP3; librosa could fall back to audioread/FFmpeg for other formats), so scores "
                "agree closely but not to the last digit. A missing file scores 0.")
def compare_audios(result, expected):
    if not result or not expected:
        return 0.0
    a = normalize_rows(mfcc(load_audio(result, "result"))).T
    b = normalize_rows(mfcc(load_audio(expected, "expected"))).T
    distance, _ = fastdtw(a, b)
    if math.isnan(distance):
        raise MetricInputError("the MFCC distance is undefined (an all-zero feature frame)")
    return 1.0 / (1.0 + distance)


# ---- video ----

def phash(img):
    """imagehash.phash: 8x8 low frequencies of the DCT of the 32x32 grey image, above their median."""
    from PIL import Image
    from scipy.fftpack import dct
    pixels = np.asarray(img.convert("L").resize((32, 32), Image.Resampling.LANCZOS), dtype=np.float64)
    low = dct(dct(pixels, axis=0), axis=1)[:8, :8]
    return low > np.median(low)


def video_frames(path, what):
    """The decoded frames of the first video stream, as RGB PIL images, one at a time."""
    import av
    check_file(path, what)
    try:
        container = av.open(path)
    except (av.AVError, ValueError, OSError) as e:
        raise MetricInputError(f"{what}: not a readable video: {e}") from None
    if not container.streams.video:
        container.close()
        raise MetricInputError(f"{what}: no video stream")
    stream = container.streams.video[0]
    if stream.codec_context.width * stream.codec_context.height > MAX_IMAGE_PIXELS:
        container.close()
        raise MetricInputError(f"{what}: frames over the {MAX_IMAGE_PIXELS} pixel cap")
    try:
        for n, frame in enumerate(container.decode(stream)):
            if n >= MAX_VIDEO_FRAMES:
                break
            yield frame.to_image()
    except (av.AVError, ValueError) as e:
        raise MetricInputError(f"{what}: video data unreadable: {e}") from None
    finally:
        container.close()


@metric("compare_videos", "media",
        options={"max_frames_to_check": "integer, default 100: frames compared from the start",
                 "threshold": "integer, default 5: pHash bits two frames may differ by, and frames that may "
                              "differ by more before the videos count as different"},
        summary="1 when the two videos' first frames match by perceptual hash and they end together",
        osworld="vlc.py compare_videos: frames read in step; when either video ends, 1 only if both ended; a "
                "frame pair whose pHash differs by more than threshold bits is a mismatch and more than "
                "threshold mismatches score 0; after max_frames_to_check frames, 1. Decoding is FFmpeg via "
                "python3-av and pHash is computed here as imagehash does (Debian lacks OpenCV's Python "
                "video API dependency chain and imagehash). Differs: an unreadable video is an error (OpenCV "
                "reads it as an empty video).")
def compare_videos(result, expected, max_frames_to_check=100, threshold=5):
    need(max_frames_to_check, (int, float), "options.max_frames_to_check")
    need(threshold, (int, float), "options.threshold")
    if not result or not expected:
        return 0.0
    a, b = video_frames(result, "result"), video_frames(expected, "expected")
    mismatches = 0
    for _ in range(int(max_frames_to_check)):
        fa, fb = next(a, None), next(b, None)
        if fa is None or fb is None:
            return 1.0 if fa is None and fb is None else 0.0
        if int(np.count_nonzero(phash(fa) != phash(fb))) > threshold:
            mismatches += 1
            if mismatches > threshold:
                return 0.0
    return 1.0


# ---- tags ----

@metric("check_mp3_meta", "media",
        summary="1 when every ID3 tag named in the rules (title, artist, ...) matches its {method, ref} rule",
        osworld="others.py check_mp3_meta: mutagen's EasyID3 keys; a list value is joined with ','; an absent "
                "tag is \"\"; each rule via _match_value_to_rule. Differs: an MPEG file without an ID3 tag has "
                "all tags \"\" (OSWorld raises ID3NoHeaderError); a file that is not MPEG audio is an error.")
def check_mp3_meta(result, expected):
    rules = need(expected, dict, "expected")
    if result is None:
        return 0.0
    from mutagen import MutagenError
    from mutagen.mp3 import EasyMP3
    check_file(result)
    try:
        tags = EasyMP3(result).tags or {}
    except MutagenError as e:
        raise MetricInputError(f"result: not an MP3 file: {e}") from None
    for name, rule in rules.items():
        value = tags.get(name, "")
        if isinstance(value, list):
            value = ",".join(value)
        if not match_rule(value, rule, f"expected.{name}"):
            return 0.0
    return 1.0
