//! The task graph: nodes and edges as the runtime announced them, and its longest chain.

/// Nodes (with names and the host time of their command) and resolved edges.
#[derive(Debug, Default)]
pub struct TaskGraph {
    names: Vec<String>,
    kinds: Vec<String>,
    host_ns: Vec<u64>,
    edges: Vec<(u32, u32)>,
}

/// The longest dependency chain: node indices in order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Chain {
    pub nodes: Vec<u32>,
}

impl TaskGraph {
    pub fn add_node(&mut self, name: String) -> u32 {
        self.add_node_with_kind(name, String::new())
    }

    /// A node with the kind the runtime gave it (`command_group_node`, ...).
    pub fn add_node_with_kind(&mut self, name: String, kind: String) -> u32 {
        self.names.push(name);
        self.kinds.push(kind);
        self.host_ns.push(0);
        u32::try_from(self.names.len() - 1).unwrap_or(u32::MAX)
    }

    pub fn add_edge(&mut self, source: u32, target: u32) {
        self.edges.push((source, target));
    }

    pub fn add_host_time(&mut self, node: u32, ns: u64) {
        if let Some(h) = self.host_ns.get_mut(node as usize) {
            *h += ns;
        }
    }

    pub fn node_count(&self) -> usize {
        self.names.len()
    }

    pub fn edge_count(&self) -> usize {
        self.edges.len()
    }

    pub fn name(&self, node: u32) -> &str {
        self.names.get(node as usize).map(String::as_str).unwrap_or("")
    }

    pub fn kind(&self, node: u32) -> &str {
        self.kinds.get(node as usize).map(String::as_str).unwrap_or("")
    }

    pub fn host_ns(&self, node: u32) -> u64 {
        self.host_ns.get(node as usize).copied().unwrap_or(0)
    }

    pub fn edges(&self) -> &[(u32, u32)] {
        &self.edges
    }

    /// The longest path (in nodes) through the graph, by Kahn's topological order. Nodes on a
    /// cycle (possible only if the runtime reused a uid mid-graph) are left out.
    pub fn longest_chain(&self) -> Chain {
        let n = self.names.len();
        if n == 0 {
            return Chain::default();
        }
        let mut out: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut indeg = vec![0u32; n];
        for &(s, t) in &self.edges {
            if (s as usize) < n && (t as usize) < n && s != t {
                out[s as usize].push(t);
                indeg[t as usize] += 1;
            }
        }
        let mut len = vec![1u64; n];
        let mut pred = vec![u32::MAX; n];
        let mut ready: Vec<u32> = (0..n as u32).filter(|&v| indeg[v as usize] == 0).collect();
        while let Some(v) = ready.pop() {
            for &t in &out[v as usize] {
                if len[v as usize] + 1 > len[t as usize] {
                    len[t as usize] = len[v as usize] + 1;
                    pred[t as usize] = v;
                }
                indeg[t as usize] -= 1;
                if indeg[t as usize] == 0 {
                    ready.push(t);
                }
            }
        }
        let mut best = 0usize;
        for v in 0..n {
            if len[v] > len[best] {
                best = v;
            }
        }
        let mut nodes = vec![best as u32];
        let mut cur = best;
        while pred[cur] != u32::MAX && nodes.len() <= n {
            cur = pred[cur] as usize;
            nodes.push(cur as u32);
        }
        nodes.reverse();
        Chain { nodes }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn chain_of_diamond_with_tail() {
        let mut g = TaskGraph::default();
        for n in ["a", "b", "c", "d", "e"] {
            g.add_node(n.to_string());
        }
        g.add_edge(0, 1);
        g.add_edge(0, 2);
        g.add_edge(1, 3);
        g.add_edge(2, 3);
        g.add_edge(3, 4);
        let c = g.longest_chain();
        assert_eq!(c.nodes.len(), 4);
        assert_eq!(c.nodes[0], 0);
        assert_eq!(*c.nodes.last().unwrap(), 4);
    }

    #[test]
    fn cycle_does_not_hang() {
        let mut g = TaskGraph::default();
        g.add_node("a".into());
        g.add_node("b".into());
        g.add_edge(0, 1);
        g.add_edge(1, 0);
        assert_eq!(g.longest_chain().nodes.len(), 1);
    }
}
