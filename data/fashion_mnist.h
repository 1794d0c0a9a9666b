// Fashion-MNIST (Xiao, Rasul and Vollgraf, 2017): 28x28 grey images of ten
// kinds of clothing, 60000 for training and 10000 for testing, in IDX files.
// ember reads them from Debian's dataset-fashion-mnist package by default.
#pragma once

#include <string>

#include "dataset.h"

namespace ember::data {

/// Which part of a dataset: Fashion-MNIST has train and test, a text corpus
/// train and validation.
enum class Split { train, test, validation };

/// Fashion-MNIST as a TensorDataset: inputs u8 [N, 1, 28, 28] read as f32 in
/// [0, 1] (pixel / 255), labels u8 [N] in [0, 10). Both files are read whole
/// at construction (47 MB for the train images) and checked: IDX headers,
/// image size, matching counts, at least one sample, and label range.
class FashionMNIST : public TensorDataset {
  public:
    /// Reads `split` from `root`, a folder holding train-images-idx3-ubyte,
    /// train-labels-idx1-ubyte, t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte
    /// (each raw or with .gz; the raw file wins when both exist). An empty root
    /// means default_root().
    explicit FashionMNIST(Split split = Split::train, const std::string& root = "");

    /// $EMBER_DATA/fashion-mnist when EMBER_DATA is set (and not empty), else
    /// the Debian package's /usr/share/datasets/fashion-mnist.
    static std::string default_root();

    static constexpr int64_t kNumClasses = 10;
    /// "T-shirt/top", "Trouser", ... for labels 0..9.
    static const char* class_name(int64_t label);

    const std::string& root() const { return root_; }

  private:
    struct Files;
    FashionMNIST(Files files, std::string root);
    static Files load(Split split, const std::string& root);

    std::string root_;
};

}  // namespace ember::data
