"""DFT, STFT, window functions and MelWeightMatrix."""
