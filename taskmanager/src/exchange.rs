//! The channels of a job inside one process: for every edge between vertices, a bounded
//! channel from each sending subtask to each receiving subtask it can route to.

use std::collections::HashMap;

use eddy_common::event::Event;
use eddy_common::plan::{JobGraph, Partitioning, VertexOutput};
use tokio::sync::mpsc::{Receiver, Sender, channel};

/// The ends of every channel of a job, to be handed to the subtasks.
pub struct LocalChannels {
    inputs: HashMap<(usize, usize), Vec<Receiver<Event>>>,
    outputs: HashMap<(usize, usize), Vec<Sender<Event>>>,
}

impl LocalChannels {
    /// Creates the channels of `graph`, each holding at most `capacity` events.
    pub fn for_job(graph: &JobGraph, capacity: usize) -> Self {
        let mut inputs: HashMap<(usize, usize), Vec<Receiver<Event>>> = HashMap::new();
        let mut outputs: HashMap<(usize, usize), Vec<Sender<Event>>> = HashMap::new();
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
                for receiver in targets {
                    let (tx, rx) = channel(capacity);
                    outputs.entry((vertex.id, sender)).or_default().push(tx);
                    inputs.entry((*target, receiver)).or_default().push(rx);
                }
            }
        }
        LocalChannels { inputs, outputs }
    }

    /// Takes the input channels of one subtask.
    pub fn take_inputs(&mut self, vertex: usize, subtask: usize) -> Vec<Receiver<Event>> {
        self.inputs.remove(&(vertex, subtask)).unwrap_or_default()
    }

    /// Takes the output channels of one subtask.
    pub fn take_outputs(&mut self, vertex: usize, subtask: usize) -> Vec<Sender<Event>> {
        self.outputs.remove(&(vertex, subtask)).unwrap_or_default()
    }
}
