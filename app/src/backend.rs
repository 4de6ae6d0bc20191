//! The backend port (server side only): the one trait through which pages and server
//! functions reach profiles and routes. `server` implements it over SQLite and the route
//! engine and hands it to Leptos as context; tests hand in a fake. `app` never touches SQL.
