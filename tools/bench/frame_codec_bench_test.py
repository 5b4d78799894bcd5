"""tools/bench/frame_codec_bench at a small size: every codec and chunking is
in the JSON, raw is a ratio of exactly 1, each compressor shrinks the frames,
the byte counts agree with the ratio, and a bad flag exits 2 and names it.
The bench itself checks every chunk's round trip byte for byte (exit 1).
"""

import json
import os
import subprocess
import unittest

CODECS = ("raw", "lz4:1", "lz4hc:9", "zstd:1")
CHUNKINGS = ("frame", "run", "batch")
FRAME_BYTES = 84 * 84


def runfile(path):
    base = os.environ.get("TEST_SRCDIR")
    if base is None:  # run by hand from the workspace root
        return os.path.abspath(os.path.join("bazel-bin", path))
    return os.path.join(base, os.environ.get("TEST_WORKSPACE", "dreplay"), path)


BINARY = runfile("tools/bench/frame_codec_bench")


class FrameCodecBenchTest(unittest.TestCase):

    def test_every_codec_and_chunking_is_measured(self):
        run = subprocess.run(
            [BINARY, "--json", "--frames_per_game=96", "--run_frames=16", "--batch_size=8",
             "--batches_per_game=4", "--min_cpu_s=0", "--codecs=" + ",".join(CODECS)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
        self.assertEqual(run.returncode, 0, run.stderr)
        report = json.loads(run.stdout)
        self.assertEqual(report["frame_bytes"], FRAME_BYTES)
        self.assertEqual(len(report["games"]), 5)
        results = {(r["codec"], r["chunking"]): r for r in report["results"]}
        self.assertEqual(set(results), {(c, k) for c in CODECS for k in CHUNKINGS})
        self.assertEqual(results[("raw", "frame")]["chunks"], 5 * 96)
        self.assertEqual(results[("raw", "run")]["chunks"], 5 * 96 // 16)
        self.assertEqual(results[("raw", "batch")]["chunks"], 5 * 4)
        for (codec, chunking), r in results.items():
            key = (codec, chunking)
            self.assertAlmostEqual(r["ratio"], r["raw_mb"] / r["compressed_mb"],
                                   delta=1e-3 * r["ratio"])
            self.assertAlmostEqual(r["bytes_per_frame"], FRAME_BYTES / r["ratio"],
                                   delta=1e-3 * r["bytes_per_frame"])
            self.assertGreater(r["compress_mb_per_cpu_s"], 0, key)
            self.assertGreater(r["decompress_mb_per_cpu_s"], 0, key)
            if codec == "raw":
                self.assertEqual(r["ratio"], 1.0, key)
            else:
                # MinAtar's rendered frames are mostly black blocks.
                self.assertGreater(r["ratio"], 5.0, key)
        for chunking in CHUNKINGS:
            self.assertEqual(results[("raw", chunking)]["raw_mb"],
                             results[("zstd:1", chunking)]["raw_mb"])

    def test_a_bad_codec_is_a_bad_flag(self):
        run = subprocess.run([BINARY, "--codecs=zstd:1,gzip"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, timeout=60)
        self.assertEqual(run.returncode, 2)
        self.assertIn("gzip", run.stderr)


if __name__ == "__main__":
    unittest.main()
