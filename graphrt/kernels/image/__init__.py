"""Image operators: ImageDecoder (through Pillow, the optional extra ``graphrt[image]``)."""
