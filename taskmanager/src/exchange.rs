//! The channels of a job: for every edge between vertices, one ordered channel from each
//! sending subtask to each receiving subtask it can route to. Inside one process the
//! channels are bounded queues ([`LocalChannels`]); across TaskManagers they are gRPC
//! streams feeding such queues (see [`crate::network`]).

use std::collections::HashMap;

use eddy_common::event::Barrier;
use eddy_common::event::Event;
use eddy_common::ids::TaskKey;
use eddy_planner::plan::{JobGraph, Partitioning, VertexOutput};
use tokio::sync::mpsc::{
    Receiver, Sender, UnboundedReceiver, UnboundedSender, channel, unbounded_channel,
};

/// An unaligned barrier on a channel's priority lane: `sent` data events went down the
/// channel before it, and are the channel's in-flight data for that checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PriorityBarrier {
    /// The barrier.
    pub barrier: Barrier,
    /// Data events sent on the channel before the barrier.
    pub sent: u64,
}

/// The receiving end of a channel: its ordered events and its priority lane.
pub struct InputChannel {
    /// Data and control events, in order.
    pub data: Receiver<Event>,
    /// Unaligned barriers, overtaking `data`.
    pub priority: UnboundedReceiver<PriorityBarrier>,
    /// Which input of the receiving task it is (see [`ChannelEnds::input_index`]).
    pub input: usize,
}

/// The sending end of a channel.
#[derive(Clone)]
pub struct OutputChannel {
    /// Data and control events, in order (bounded: backpressure).
    pub data: Sender<Event>,
    /// Unaligned barriers.
    pub priority: UnboundedSender<PriorityBarrier>,
}

/// Both ends of a new in-process channel holding at most `capacity` events.
pub fn local_channel(capacity: usize) -> (OutputChannel, InputChannel) {
    let (data_tx, data_rx) = channel(capacity);
    let (priority_tx, priority_rx) = unbounded_channel();
    (
        OutputChannel {
            data: data_tx,
            priority: priority_tx,
        },
        InputChannel {
            data: data_rx,
            priority: priority_rx,
            input: 0,
        },
    )
}

/// One channel: from a subtask of a vertex to a subtask of the vertex it feeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChannelEnds {
    /// The sending vertex.
    pub from_vertex: usize,
    /// The sending subtask.
    pub from_subtask: usize,
    /// The receiving vertex.
    pub to_vertex: usize,
    /// The receiving subtask.
    pub to_subtask: usize,
}

impl ChannelEnds {
    /// The index of the sending vertex among the receiving vertex's inputs: which input
    /// of a join (or union) the channel's rows belong to.
    pub fn input_index(&self, graph: &JobGraph) -> usize {
        graph.vertices[self.to_vertex]
            .inputs
            .iter()
            .position(|v| *v == self.from_vertex)
            .unwrap_or(0)
    }
}

/// Every channel of `graph`; a sender's channels are in the order of the receiving
/// subtasks, which is the order its output routes by.
pub fn channels(graph: &JobGraph) -> Vec<ChannelEnds> {
    let mut all = Vec::new();
    for vertex in &graph.vertices {
        let VertexOutput::Exchange {
            target,
            partitioning,
        } = &vertex.output
        else {
            continue;
        };
        let receivers = graph.vertices[*target].parallelism;
        for sender in 0..vertex.parallelism {
            let targets: Vec<usize> = match partitioning {
                Partitioning::Forward => vec![sender % receivers],
                Partitioning::Single => vec![0],
                Partitioning::Hash { .. } | Partitioning::Rebalance => (0..receivers).collect(),
            };
            all.extend(targets.into_iter().map(|receiver| ChannelEnds {
                from_vertex: vertex.id,
                from_subtask: sender,
                to_vertex: *target,
                to_subtask: receiver,
            }));
        }
    }
    all
}

/// The ends of every channel of a job inside one process, to be handed to the subtasks.
pub struct LocalChannels {
    inputs: HashMap<TaskKey, Vec<InputChannel>>,
    outputs: HashMap<TaskKey, Vec<OutputChannel>>,
}

impl LocalChannels {
    /// Creates the channels of `graph`, each holding at most `capacity` events.
    pub fn for_job(graph: &JobGraph, capacity: usize) -> Self {
        let mut inputs: HashMap<TaskKey, Vec<InputChannel>> = HashMap::new();
        let mut outputs: HashMap<TaskKey, Vec<OutputChannel>> = HashMap::new();
        for ends in channels(graph) {
            let (tx, mut rx) = local_channel(capacity);
            rx.input = ends.input_index(graph);
            outputs
                .entry(TaskKey::new(ends.from_vertex, ends.from_subtask))
                .or_default()
                .push(tx);
            inputs
                .entry(TaskKey::new(ends.to_vertex, ends.to_subtask))
                .or_default()
                .push(rx);
        }
        LocalChannels { inputs, outputs }
    }

    /// Takes the input channels of one subtask.
    pub fn take_inputs(&mut self, task: TaskKey) -> Vec<InputChannel> {
        self.inputs.remove(&task).unwrap_or_default()
    }

    /// Takes the output channels of one subtask.
    pub fn take_outputs(&mut self, task: TaskKey) -> Vec<OutputChannel> {
        self.outputs.remove(&task).unwrap_or_default()
    }
}
