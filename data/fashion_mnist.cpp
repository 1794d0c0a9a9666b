// Finding and checking the Fashion-MNIST files; the samples are then a
// TensorDataset over the two tensors read_idx returns.
#include "data/fashion_mnist.h"

#include <sys/stat.h>

#include <cstdlib>

#include "core/error.h"
#include "core/file.h"
#include "data/idx.h"

namespace ember::data {

namespace {

constexpr int64_t kSide = 28;

// `dir/name` if it is a regular file, else `dir/name.gz` if that is one. A
// candidate that exists but is something else (a folder, a pipe) is named
// with what it is; when neither exists, the message says how to get them.
std::string find_file(const std::string& dir, const std::string& name) {
    const std::string raw = dir + "/" + name, gz = raw + ".gz";
    struct stat st {};
    std::string odd;  // the first candidate that exists but is no regular file
    for (const std::string& p : {raw, gz}) {
        if (::stat(p.c_str(), &st) != 0) continue;
        if (S_ISREG(st.st_mode)) return p;
        if (odd.empty()) odd = str(p, " is ", file_kind(st.st_mode));
    }
    EMBER_CHECK(odd.empty(), "FashionMNIST: ", odd, "; a regular file is needed (raw or .gz)");
    EMBER_FAIL("FashionMNIST: neither ", raw, " nor ", gz,
               " exists (install Debian's dataset-fashion-mnist package, set EMBER_DATA to "
               "the folder that holds fashion-mnist/, or pass the root folder)");
}

}  // namespace

struct FashionMNIST::Files {
    Tensor images, labels;
};

std::string FashionMNIST::default_root() {
    const char* env = std::getenv("EMBER_DATA");
    if (env && *env) return std::string(env) + "/fashion-mnist";
    return "/usr/share/datasets/fashion-mnist";
}

FashionMNIST::Files FashionMNIST::load(Split split, const std::string& root) {
    EMBER_CHECK(split != Split::validation,
                "FashionMNIST: it has a train and a test split, no validation split");
    const std::string prefix = split == Split::train ? "train" : "t10k";
    const std::string ipath = find_file(root, prefix + "-images-idx3-ubyte");
    const std::string lpath = find_file(root, prefix + "-labels-idx1-ubyte");
    Tensor images = read_idx(ipath), labels = read_idx(lpath);
    EMBER_CHECK(images.dtype() == DType::u8 && images.dim() == 3 && images.size(1) == kSide &&
                    images.size(2) == kSide,
                "FashionMNIST: ", ipath, " holds ", dtype_name(images.dtype()), " ",
                shape_str(images.shape()), ", expected u8 [N, 28, 28] images");
    EMBER_CHECK(labels.dtype() == DType::u8 && labels.dim() == 1, "FashionMNIST: ", lpath,
                " holds ", dtype_name(labels.dtype()), " ", shape_str(labels.shape()),
                ", expected u8 [N] labels");
    EMBER_CHECK(images.size(0) == labels.size(0), "FashionMNIST: ", ipath, " holds ",
                images.size(0), " images but ", lpath, " holds ", labels.size(0), " labels");
    // An empty split would train on nothing: a loader over it yields no batches.
    EMBER_CHECK(images.size(0) > 0, "FashionMNIST: ", ipath, " and ", lpath,
                " hold no samples (0 images, 0 labels)");
    const uint8_t* l = labels.data<uint8_t>();
    for (int64_t i = 0; i < labels.size(0); ++i)
        EMBER_CHECK(l[i] < kNumClasses, "FashionMNIST: ", lpath, ": label ", int(l[i]),
                    " of sample ", i, " is not in [0, ", kNumClasses, ")");
    return {images.unsqueeze(1), labels};
}

FashionMNIST::FashionMNIST(Split split, const std::string& root)
    : FashionMNIST(load(split, root.empty() ? default_root() : root),
                   root.empty() ? default_root() : root) {}

FashionMNIST::FashionMNIST(Files files, std::string root)
    : TensorDataset(std::move(files.images), std::move(files.labels), {.scale = 1.0 / 255.0}),
      root_(std::move(root)) {}

const char* FashionMNIST::class_name(int64_t label) {
    static const char* const names[kNumClasses] = {
        "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
        "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
    EMBER_CHECK(label >= 0 && label < kNumClasses, "FashionMNIST::class_name: label ", label,
                " is not in [0, ", kNumClasses, ")");
    return names[label];
}

}  // namespace ember::data
