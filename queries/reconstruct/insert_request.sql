-- One reconstructed request on one node.
INSERT INTO reconstructed_requests (request_id, node, stub, reasons, waited, unread, contradicted,
                                    sampled)
VALUES ($request_id, $node, $stub, $reasons, $waited, $unread, $contradicted, $sampled);
