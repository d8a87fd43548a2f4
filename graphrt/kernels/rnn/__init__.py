"""RNN, GRU and LSTM."""
