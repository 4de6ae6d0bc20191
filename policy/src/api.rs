//! REST and server-function data types for profiles and routes (to be filled by the route
//! engine work, issue 5): what a caller sends to start routed work, what the profile CRUD
//! takes and returns, and the route list and detail views. Pure data; the server validates.
