// The replica's model, data set and optimizers (replica.h). Each layer's forward and backward
// pass runs over the whole shard at once as Eigen matrix products on one thread, so the same
// weights and samples give the same bits on every rank.
#define EIGEN_DONT_PARALLELIZE
#include "train/replica.h"

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <numbers>
#include <thread>

#include "base/clock.h"
#include "base/errors.h"
#include "exec/check.h"

namespace arl {

namespace {

using Matrix = Eigen::MatrixXf;
using MatrixMap = Eigen::Map<Eigen::MatrixXf>;
using ConstMatrixMap = Eigen::Map<const Eigen::MatrixXf>;
using VectorMap = Eigen::Map<Eigen::VectorXf>;
using ConstVectorMap = Eigen::Map<const Eigen::VectorXf>;
using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;

// ---- Counter-based random numbers -----------------------------------------------------------

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

// splitmix64's output function (Steele, Lea and Flood, OOPSLA 2014; Vigna's splitmix64.c).
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Output `counter` of a splitmix64 generator whose state starts at `key`: any element of a
// stream without the elements before it, which is what lets a rank make any sample alone.
uint64_t counterRandom(uint64_t key, uint64_t counter) {
  return mix64(key + (counter + 1) * kGolden);
}

// Streams of different kinds (weights, centroids, labels, noise) and indices start at
// unrelated states, so that no stream is a shifted copy of another.
enum class Stream : uint64_t { Weights = 1, Centroid = 2, Label = 3, Noise = 4 };
uint64_t streamKey(uint64_t seed, Stream kind, uint64_t index) {
  return mix64(mix64(seed ^ (static_cast<uint64_t>(kind) * kGolden)) ^ mix64(index + kGolden));
}

// (0, 1], so that log() below never sees 0.
double uniform01(uint64_t bits) { return (static_cast<double>(bits >> 11) + 1.0) * 0x1.0p-53; }

// n normal values of mean 0 and deviation `sigma` from stream `key`: Box-Muller, each pair of
// uniforms giving two values.
void fillNormal(uint64_t key, float* out, size_t n, double sigma) {
  for (size_t i = 0; i < n; i += 2) {
    const double r = sigma * std::sqrt(-2.0 * std::log(uniform01(counterRandom(key, i))));
    const double theta = 2.0 * std::numbers::pi * uniform01(counterRandom(key, i + 1));
    out[i] = static_cast<float>(r * std::cos(theta));
    if (i + 1 < n) {
      out[i + 1] = static_cast<float>(r * std::sin(theta));
    }
  }
}

// ---- The model's layout ---------------------------------------------------------------------

// Layer l of the flat vector: `out` x `in` weights (column-major) at `offset`, then `out`
// biases.
struct Layer {
  uint32_t in = 0;
  uint32_t out = 0;
  size_t offset = 0;
  size_t weights() const { return size_t{in} * out; }
  size_t size() const { return weights() + out; }
  size_t end() const { return offset + size(); }
};

std::vector<Layer> layout(const std::vector<uint32_t>& widths) {
  ARL_ENFORCE(widths.size() >= 2, "a model needs at least 2 widths, got " << widths.size());
  std::vector<Layer> layers;
  size_t offset = 0;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    layers.push_back(Layer{widths[i], widths[i + 1], offset});
    offset = layers.back().end();
  }
  return layers;
}

// He (Kaiming) normal weights, N(0, 2/in) (He et al., ICCV 2015), zero biases.
void initWeights(const std::vector<Layer>& layers, uint64_t seed, float* params) {
  for (size_t l = 0; l < layers.size(); ++l) {
    const Layer& L = layers[l];
    fillNormal(streamKey(seed, Stream::Weights, l), params + L.offset, L.weights(),
               std::sqrt(2.0 / L.in));
    std::fill_n(params + L.offset + L.weights(), L.out, 0.0f);
  }
}

// ---- The data set ---------------------------------------------------------------------------

// Spread of the class centroids and of the noise around them, per input. The classes overlap
// enough that a few steps do not learn them, and separate enough that 50 steps of the default
// model take the loss from about 2.4 to about 0.1 (the tests hold both ends).
constexpr double kCentroidSigma = 0.08;
constexpr double kNoiseSigma = 0.5;

// A synthetic classification task: one centroid per class; sample i is its class's centroid
// plus Gaussian noise, its class a hash of i. Every sample is a pure function of (seed, i).
class DataSet {
 public:
  DataSet(uint64_t seed, uint32_t inputs, uint32_t classes)
      : seed_(seed), centroids_(inputs, classes) {
    for (uint32_t c = 0; c < classes; ++c) {
      fillNormal(streamKey(seed, Stream::Centroid, c), centroids_.col(c).data(), inputs,
                 kCentroidSigma);
    }
  }

  // Samples first .. first + x.cols() - 1 into the columns of x, their classes into labels.
  void fill(uint64_t first, Matrix& x, std::vector<uint32_t>& labels) const {
    const auto classes = static_cast<uint64_t>(centroids_.cols());
    for (Eigen::Index j = 0; j < x.cols(); ++j) {
      const uint64_t i = first + static_cast<uint64_t>(j);
      const auto label =
          static_cast<uint32_t>(counterRandom(streamKey(seed_, Stream::Label, i), 0) % classes);
      fillNormal(streamKey(seed_, Stream::Noise, i), x.col(j).data(), static_cast<size_t>(x.rows()),
                 kNoiseSigma);
      x.col(j) += centroids_.col(label);
      labels[static_cast<size_t>(j)] = label;
    }
  }

 private:
  uint64_t seed_;
  Matrix centroids_;  // inputs x classes
};

// ---- Forward and backward -------------------------------------------------------------------

// The model over a batch of a fixed number of samples, one layer at a time. Activations live
// here between calls, so a step allocates nothing of its own.
class Network {
 public:
  Network(const std::vector<uint32_t>& widths, uint32_t samples)
      : layers_(layout(widths)), x_(widths.front(), samples), labels_(samples) {
    for (const Layer& L : layers_) {
      act_.emplace_back(L.out, samples);
      delta_.emplace_back(L.out, samples);
    }
    colMax_.resize(samples);
    colSum_.resize(samples);
  }

  uint32_t layerCount() const { return static_cast<uint32_t>(layers_.size()); }
  Matrix& input() { return x_; }
  std::vector<uint32_t>& labels() { return labels_; }
  // The summed cross-entropy of the batch, after the last layer's forward().
  double lossSum() const { return lossSum_; }

  // Layer l's output, ReLU'd; the last layer's logits, their softmax and the loss.
  void forward(uint32_t l, const float* params) {
    const Layer& L = layers_[l];
    const Matrix& in = l == 0 ? x_ : act_[l - 1];
    Matrix& z = act_[l];
    z.noalias() = ConstMatrixMap(params + L.offset, L.out, L.in) * in;
    z.colwise() += ConstVectorMap(params + L.offset + L.weights(), L.out);
    if (l + 1 < layers_.size()) {
      z = z.cwiseMax(0.0f);
    } else {
      softmaxLoss();
    }
  }

  // Layer l's delta (the loss gradient at its pre-activation), then its weight and bias
  // gradients: dW = delta * input^T, db = delta summed over the samples. The loss gradient
  // is the batch's summed one times `scale`.
  void backward(uint32_t l, const float* params, float* grads, float scale) {
    const Layer& L = layers_[l];
    Matrix& d = delta_[l];
    if (l + 1 == layers_.size()) {
      // delta_ holds the softmax since forward(): d(loss)/d(logits) = p - onehot(label).
      for (size_t j = 0; j < labels_.size(); ++j) {
        d(labels_[j], static_cast<Eigen::Index>(j)) -= 1.0f;
      }
      d *= scale;
    } else {
      const Layer& above = layers_[l + 1];
      d.noalias() =
          ConstMatrixMap(params + above.offset, above.out, above.in).transpose() * delta_[l + 1];
      d = (act_[l].array() > 0.0f).select(d.array(), 0.0f).matrix();
    }
    const Matrix& in = l == 0 ? x_ : act_[l - 1];
    MatrixMap(grads + L.offset, L.out, L.in).noalias() = d * in.transpose();
    VectorMap(grads + L.offset + L.weights(), L.out) = d.rowwise().sum();
  }

 private:
  // Softmax of the logits into the last delta, the max logit subtracted for stability; the
  // loss of a sample is log(sum exp(z - max)) - (z_label - max).
  void softmaxLoss() {
    const Matrix& z = act_.back();
    Matrix& p = delta_.back();
    colMax_ = z.colwise().maxCoeff();
    p = (z.rowwise() - colMax_).array().exp().matrix();
    colSum_ = p.colwise().sum();
    p.array().rowwise() /= colSum_.array();
    lossSum_ = 0;
    for (size_t j = 0; j < labels_.size(); ++j) {
      const auto c = static_cast<Eigen::Index>(j);
      lossSum_ += std::log(static_cast<double>(colSum_(c))) -
                  static_cast<double>(z(labels_[j], c) - colMax_(c));
    }
  }

  std::vector<Layer> layers_;
  Matrix x_;  // inputs x samples
  std::vector<uint32_t> labels_;
  std::vector<Matrix> act_;    // act_[l]: layer l's output (the last: logits), out x samples
  std::vector<Matrix> delta_;  // delta_[l]: the loss gradient at layer l's pre-activation
  Eigen::RowVectorXf colMax_;
  Eigen::RowVectorXf colSum_;
  double lossSum_ = 0;
};

// Times one compute span and reports it; a factor above 1 stretches the span by sleeping
// (factor - 1) times the work's own time after the work, as a slower device would take.
class SpanTimer {
 public:
  // report may be null (nothing reported).
  SpanTimer(const SpanFn* report, double factor) : report_(report), factor_(factor) {}

  template <class Work>
  void operator()(TrainSpan::Kind kind, uint32_t index, Work&& work) const {
    const int64_t start = steadyNowNs();
    work();
    int64_t end = steadyNowNs();
    if (factor_ > 1.0) {
      std::this_thread::sleep_for(
          std::chrono::nanoseconds(static_cast<int64_t>((factor_ - 1.0) * (end - start))));
      end = steadyNowNs();
    }
    if (report_ && *report_) {
      (*report_)(kind, index, start, end);
    }
  }

 private:
  const SpanFn* report_;
  double factor_;
};

// The forward pass over samples first .. first + shard - 1, returning the summed loss. Layer
// 0's span includes making its inputs (the data loader's part of a step).
double forwardPass(Network& net, const DataSet& data, const float* params, uint64_t first,
                   const SpanTimer& timed) {
  for (uint32_t l = 0; l < net.layerCount(); ++l) {
    timed(TrainSpan::Kind::Forward, l, [&] {
      if (l == 0) {
        data.fill(first, net.input(), net.labels());
      }
      net.forward(l, params);
    });
  }
  return net.lossSum();
}

// The backward pass from the last layer to the first; afterLayer(l) runs once layer l's
// gradients are written, before the layers below it start.
template <class AfterLayer>
void backwardPass(Network& net, const float* params, float* grads, float scale,
                  const SpanTimer& timed, AfterLayer&& afterLayer) {
  for (uint32_t l = net.layerCount(); l-- > 0;) {
    timed(TrainSpan::Kind::Backward, l, [&] { net.backward(l, params, grads, scale); });
    afterLayer(l);
  }
}

// The config's model and batch checked as one process would train them.
void checkModel(const TrainConfig& cfg) {
  TrainConfig one = cfg;
  one.sync = SyncMode::AllReduce;
  one.slowComputeRank = -1;
  checkTrainConfig(one, 1);
}

// ---- Optimizers -----------------------------------------------------------------------------

// SGD with momentum as torch.optim.SGD computes it (dampening 0, no Nesterov):
// v = momentum * v + g; w -= lr * v.
void sgdStep(ArrayMap w, ArrayMap v, const ConstArrayMap& g, float lr, float momentum) {
  v = momentum * v + g;
  w -= lr * v;
}

// Adam (Kingma and Ba, ICLR 2015, Algorithm 1) at update t (from 1): the moments m and v,
// their bias-corrected estimates, w -= lr * m^ / (sqrt(v^) + eps).
void adamStep(ArrayMap w, ArrayMap m, ArrayMap v, const ConstArrayMap& g, float lr, uint64_t t) {
  constexpr float kBeta1 = 0.9f;
  constexpr float kBeta2 = 0.999f;
  constexpr float kEps = 1e-8f;
  const auto td = static_cast<double>(t);
  const auto c1 = static_cast<float>(1.0 / (1.0 - std::pow(double{kBeta1}, td)));
  const auto c2 = static_cast<float>(1.0 / (1.0 - std::pow(double{kBeta2}, td)));
  m = kBeta1 * m + (1.0f - kBeta1) * g;
  v = kBeta2 * v + (1.0f - kBeta2) * g.square();
  w -= lr * (m * c1) / ((v * c2).sqrt() + kEps);
}

}  // namespace

// ---- Buckets --------------------------------------------------------------------------------

std::vector<Bucket> planBuckets(const std::vector<uint32_t>& widths, uint64_t bucketBytes) {
  ARL_ENFORCE(bucketBytes > 0, "a bucket of 0 bytes");
  const std::vector<Layer> layers = layout(widths);
  const size_t cap = std::max<size_t>(1, bucketBytes / sizeof(float));
  const size_t firstCap = std::min<size_t>(cap, kFirstBucketBytes / sizeof(float));
  std::vector<Bucket> buckets;
  bool open = false;  // whether the last bucket may take another layer
  for (uint32_t l = static_cast<uint32_t>(layers.size()); l-- > 0;) {
    if (open && buckets.back().end - layers[l].offset <= cap) {
      buckets.back().begin = layers[l].offset;
      buckets.back().firstLayer = l;
      // The first bucket closes once it holds firstCap, as DDP's does.
      if (buckets.size() == 1 && buckets.back().end - buckets.back().begin >= firstCap) {
        open = false;
      }
      continue;
    }
    // A layer over the cap is cut into buckets of the cap from its end back, all complete
    // when its gradients are; only the last (lowest) piece, if shorter, may take more layers.
    for (size_t hi = layers[l].end(); hi > layers[l].offset;) {
      const size_t lo = hi - std::min(cap, hi - layers[l].offset);
      buckets.push_back(Bucket{lo, hi, l, l});
      hi = lo;
    }
    const size_t last = buckets.back().end - buckets.back().begin;
    open = last < (buckets.size() == 1 ? firstCap : cap);
  }
  return buckets;
}

// ---- Replica --------------------------------------------------------------------------------

struct Replica::Impl {
  Impl(const TrainConfig& c, int r, int n)
      : cfg(c),
        rank(r),
        shard(c.batch / static_cast<uint32_t>(n)),
        params(parameterCount(c.layers)),
        grads(params.size(), 0.0f),
        buckets(planBuckets(c.layers, c.bucketBytes)),
        data(c.seed, c.layers.front(), c.layers.back()),
        net(c.layers, shard) {
    initWeights(layout(c.layers), c.seed, params.data());
    moment1.assign(params.size(), 0.0f);
    if (c.optimizer == OptimizerKind::Adam) {
      moment2.assign(params.size(), 0.0f);
    }
  }

  double slowFactor() const { return cfg.slowComputeRank == rank ? cfg.slowComputeFactor : 1.0; }

  TrainConfig cfg;
  int rank;
  uint32_t shard;  // samples per rank and step
  std::vector<float> params;
  std::vector<float> grads;
  std::vector<float> moment1;  // SGD's velocity, or Adam's first moment
  std::vector<float> moment2;  // Adam's second moment
  uint64_t updates = 0;
  std::vector<Bucket> buckets;
  DataSet data;
  Network net;
};

Replica::Replica(const TrainConfig& cfg, int rank, int nranks) {
  checkTrainConfig(cfg, nranks);
  ARL_ENFORCE(rank >= 0 && rank < nranks, "rank " << rank << " of " << nranks);
  impl_ = std::make_unique<Impl>(cfg, rank, nranks);
}

Replica::~Replica() = default;

size_t Replica::paramCount() const { return impl_->params.size(); }
float* Replica::params() { return impl_->params.data(); }
const float* Replica::params() const { return impl_->params.data(); }
float* Replica::grads() { return impl_->grads.data(); }
const float* Replica::grads() const { return impl_->grads.data(); }
const std::vector<Bucket>& Replica::buckets() const { return impl_->buckets; }

double Replica::computeGradients(uint32_t step, const std::function<void(size_t bucket)>& onBucket,
                                 const SpanFn& span) {
  Impl& s = *impl_;
  const SpanTimer timed(&span, s.slowFactor());
  const uint64_t first =
      uint64_t{step} * s.cfg.batch + static_cast<uint64_t>(s.rank) * uint64_t{s.shard};
  const double lossSum = forwardPass(s.net, s.data, s.params.data(), first, timed);
  size_t next = 0;
  backwardPass(s.net, s.params.data(), s.grads.data(), 1.0f / static_cast<float>(s.cfg.batch),
               timed, [&](uint32_t layer) {
                 // Buckets are in backward order, each complete once its first layer is (the
                 // pieces of a layer over the cap all at once).
                 while (next < s.buckets.size() && s.buckets[next].firstLayer == layer) {
                   if (onBucket) {
                     onBucket(next);
                   }
                   ++next;
                 }
               });
  ARL_ENFORCE(next == s.buckets.size(), next << " of " << s.buckets.size() << " buckets done");
  return lossSum / s.shard;
}

void Replica::applyUpdate(const float* g, const SpanFn& span) {
  Impl& s = *impl_;
  const SpanTimer timed(&span, s.slowFactor());
  const auto n = static_cast<Eigen::Index>(s.params.size());
  timed(TrainSpan::Kind::Optimizer, 0, [&] {
    ++s.updates;
    if (s.cfg.optimizer == OptimizerKind::Adam) {
      adamStep(ArrayMap(s.params.data(), n), ArrayMap(s.moment1.data(), n),
               ArrayMap(s.moment2.data(), n), ConstArrayMap(g, n), s.cfg.lr, s.updates);
    } else {
      sgdStep(ArrayMap(s.params.data(), n), ArrayMap(s.moment1.data(), n), ConstArrayMap(g, n),
              s.cfg.lr, s.cfg.momentum);
    }
  });
}

uint64_t Replica::digest() const {
  return fnv1a64(kFnv64Offset, impl_->params.data(), impl_->params.size() * sizeof(float));
}

// ---- One process, the whole batch -----------------------------------------------------------

double fullBatchGradient(const TrainConfig& cfg, const float* params, uint32_t step,
                         std::vector<float>& grad) {
  checkModel(cfg);
  Network net(cfg.layers, cfg.batch);
  const DataSet data(cfg.seed, cfg.layers.front(), cfg.layers.back());
  const SpanTimer untimed(nullptr, 1.0);
  const double lossSum = forwardPass(net, data, params, uint64_t{step} * cfg.batch, untimed);
  grad.assign(parameterCount(cfg.layers), 0.0f);
  backwardPass(net, params, grad.data(), 1.0f / static_cast<float>(cfg.batch), untimed,
               [](uint32_t) {});
  return lossSum / cfg.batch;
}

double batchLoss(const TrainConfig& cfg, const float* params, uint32_t step) {
  checkModel(cfg);
  Network net(cfg.layers, cfg.batch);
  const DataSet data(cfg.seed, cfg.layers.front(), cfg.layers.back());
  const SpanTimer untimed(nullptr, 1.0);
  return forwardPass(net, data, params, uint64_t{step} * cfg.batch, untimed) / cfg.batch;
}

double weightDistance(const float* a, const float* b, size_t n) {
  const auto len = static_cast<Eigen::Index>(n);
  return (Eigen::Map<const Eigen::VectorXf>(a, len).cast<double>() -
          Eigen::Map<const Eigen::VectorXf>(b, len).cast<double>())
      .norm();
}

}  // namespace arl
