#!/usr/bin/env python3
"""Writes images with PIL and PIL's own decodes/resizes of them, the reference of image_codec_test.

    pil_reference.py OUT_DIR    # exit status 3 when PIL is not installed
Writes OUT_DIR/{photo.jpg, grey.jpg, cmyk.jpg, rgb.png, grey.png, rgba.png} and, for each,
NAME.rgb: PIL's Image.convert("RGB") pixels (raw HWC bytes), and
photo.resize.rgb: photo.jpg cropped to (5, 7, 5+33, 7+21), then resized to 16x16 with BILINEAR
(torchvision's resized_crop: crop, then resize).
"""
import math
import os
import sys

try:
    from PIL import Image
except ImportError:
    sys.exit(3)

out = sys.argv[1]
w, h = 48, 40
# A smooth pattern with some edges, like a photo: JPEG decoders agree on it.
rgb = Image.new("RGB", (w, h))
rgb.putdata([(int(127 + 120 * math.sin(x / 5.0)), int(127 + 120 * math.cos(y / 4.0)), (x * 5 + y * 3) % 256)
             for y in range(h) for x in range(w)])
rgb.save(os.path.join(out, "photo.jpg"), quality=92)
rgb.convert("L").save(os.path.join(out, "grey.jpg"), quality=92)
rgb.convert("CMYK").save(os.path.join(out, "cmyk.jpg"), quality=92)  # Adobe-marked, stored inverted, as Photoshop
rgb.save(os.path.join(out, "rgb.png"))
rgb.convert("L").save(os.path.join(out, "grey.png"))
rgba = rgb.copy()
rgba.putalpha(Image.linear_gradient("L").resize((w, h)))
rgba.save(os.path.join(out, "rgba.png"))
for name in ["photo.jpg", "grey.jpg", "cmyk.jpg", "rgb.png", "grey.png", "rgba.png"]:
    with Image.open(os.path.join(out, name)) as im:
        with open(os.path.join(out, name.split(".")[0] + "." + name.split(".")[1] + ".rgb"), "wb") as f:
            f.write(im.convert("RGB").tobytes())
with Image.open(os.path.join(out, "photo.jpg")) as im:
    small = im.convert("RGB").crop((5, 7, 5 + 33, 7 + 21)).resize((16, 16), Image.BILINEAR)
    with open(os.path.join(out, "photo.resize.rgb"), "wb") as f:
        f.write(small.tobytes())
