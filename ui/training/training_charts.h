// What the Training view shows of a training record (train/train_types.h), as plain data: the
// loss and the replicas' spread against the step, the step time split into compute, hidden and
// exposed communication, one sample step's spans per rank, and the bucket-size sweep. No Qt
// here (as charts/chart_data.h): training_view.h draws it, the tests read it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "charts/chart_data.h"
#include "train/train_types.h"

namespace arl::ui {

// One run's mean step, stacked: compute with no communication in flight, compute with
// communication hidden behind it, and communication the compute did not hide. The three add
// up to the step time.
struct StepSplitBar {
  std::string label;  // the run's
  double computeAloneUs = 0;
  double hiddenUs = 0;
  double exposedUs = 0;
  double stepUs = 0;
  uint32_t firstStep = 0;  // the steps averaged: firstStep..lastStep
  uint32_t lastStep = 0;
};

struct StepSplitData {
  std::string title;
  std::string subtitle;
  std::vector<StepSplitBar> bars;
  ChartAxis y;  // the step time, from 0
  std::string note;
};

// A span of the sample step on its lane: each rank has a compute lane (2 * rank) and a
// communication lane (2 * rank + 1).
struct TrainLaneSpan {
  int lane = 0;
  int rank = 0;
  TrainSpan::Kind kind = TrainSpan::Kind::Forward;
  uint32_t index = 0;  // the layer (forward, backward) or the bucket (reduce, push)
  double startUs = 0;  // from the rank's start of the step
  double endUs = 0;
  std::string label;  // "L2", "b0": written on the span where it is wide enough
};

struct TrainTimelineData {
  std::string title;
  std::string subtitle;
  int nranks = 0;
  std::vector<std::string> lanes;  // "rank 0 compute", "rank 0 comm", ...
  std::vector<int> laneRank;
  std::vector<TrainLaneSpan> spans;
  std::vector<double> stepEndUs;  // per rank: the end of its step
  double endUs = 0;               // the time axis: the longest rank's step
  bool psAsync = false;           // push and pull instead of reduce
  std::string note;
};

// Every chart of a record, in the view's order.
struct TrainingCharts {
  std::string summary;  // one line: runs, model, workers, algorithm, network, backend
  XYChartData loss;
  StepSplitData split;
  TrainTimelineData timeline;
  XYChartData spread;
  // Whether every step of every run left all ranks' weights bitwise equal, said per run:
  // "overlap on: every step bitwise identical on all 4 ranks".
  std::string identicalCaption;
  XYChartData sweep;
  // Shown instead of the sweep's plot when the record has none; empty when it has one.
  std::string sweepMessage;
};

inline constexpr const char* kNoSweepMessage =
    "No bucket sweep in this record: allreduce-lab train --sweep-buckets";

// The charts of `r`; the timeline shows run `timelineRun`'s sample step (the first run with
// one when out of range or that run has none).
TrainingCharts trainingCharts(const TrainRecord& r, size_t timelineRun = SIZE_MAX);

// The run a timeline of `timelineRun` shows: that run when it has a sample step, else the first
// that has one; r.runs.size() when none has.
size_t timelineRunOf(const TrainRecord& r, size_t timelineRun);

// Each chart on its own, for a record that is not empty.
XYChartData lossChart(const TrainRecord& r);
StepSplitData stepSplit(const TrainRecord& r);
TrainTimelineData sampleStepTimeline(const TrainRun& run);
XYChartData spreadChart(const TrainRecord& r);
std::string identicalCaption(const TrainRecord& r);
XYChartData sweepChart(const TrainRecord& r);

// "measured on 4 workers · ring · slice 256K · unshaped network · cpu · 784x512x512x10 ·
// batch 256 · sgd": what the runs share (values that differ are joined by " / ").
std::string recordSubtitle(const TrainRecord& r);
std::string runSubtitle(const TrainRun& run);

}  // namespace arl::ui
